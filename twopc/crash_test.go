package twopc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

// crashExpect is what a failpoint leaves behind in one variant of the flow
// Begin → DecideOrLearn(Committed) → Resolve → Release.
type crashExpect struct {
	step       string // flow step the injected error surfaces from; "" = not reached in this variant
	begun      bool   // a coordinator record exists
	decided    bool   // the commit decision exists
	unresolved int    // participants whose intents are still open
}

// crashExpectations: per failpoint, [without, with] DeferResolution. The
// workload has 4 participants.
var crashExpectations = map[string][2]crashExpect{
	fault.TwoPCBeginBefore:   {{step: "begin"}, {step: "begin"}},
	fault.TwoPCBeginAfter:    {{step: "begin", begun: true, unresolved: 4}, {step: "begin", begun: true, unresolved: 4}},
	fault.TwoPCDecideBefore:  {{step: "decide", begun: true, unresolved: 4}, {step: "decide", begun: true, unresolved: 4}},
	fault.TwoPCDecideAfter:   {{step: "decide", decided: true}, {step: "decide", begun: true, decided: true, unresolved: 4}},
	fault.TwoPCResolveBefore: {{}, {step: "resolve", begun: true, decided: true, unresolved: 4}},
	fault.TwoPCResolveAfter:  {{}, {step: "resolve", begun: true, decided: true, unresolved: 3}},
	fault.TwoPCReleaseBefore: {{step: "release", decided: true}, {step: "release", decided: true}},
	fault.TwoPCReleaseAfter:  {{step: "release"}, {step: "release"}},
	fault.TwoPCChainBefore:   {{}, {}},
	fault.TwoPCChainAfter:    {{}, {}},
}

// chainedExpectations is crashExpectations for the flow BeginCommit →
// Resolve → Release, where prepares and decision are one chained write.
var chainedExpectations = map[string][2]crashExpect{
	fault.TwoPCBeginBefore:   {{}, {}},
	fault.TwoPCBeginAfter:    {{}, {}},
	fault.TwoPCDecideBefore:  {{}, {}},
	fault.TwoPCDecideAfter:   {{}, {}},
	fault.TwoPCChainBefore:   {{step: "chain"}, {step: "chain"}},
	fault.TwoPCChainAfter:    {{step: "chain", decided: true}, {step: "chain", begun: true, decided: true, unresolved: 4}},
	fault.TwoPCResolveBefore: {{}, {step: "resolve", begun: true, decided: true, unresolved: 4}},
	fault.TwoPCResolveAfter:  {{}, {step: "resolve", begun: true, decided: true, unresolved: 3}},
	fault.TwoPCReleaseBefore: {{step: "release", decided: true}, {step: "release", decided: true}},
	fault.TwoPCReleaseAfter:  {{step: "release"}, {step: "release"}},
}

// onceExpectations is crashExpectations for CommitOnce, which writes the
// documents in one write and leaves no record or decision of its own (its
// caller records the outcome): a crash before it leaves nothing, after it
// the batch applied. Resolution deferred, it does not apply.
var onceExpectations = map[string][2]crashExpect{
	fault.TwoPCChainBefore: {{step: "chain"}},
	fault.TwoPCChainAfter:  {{step: "chain"}},
}

var policies = []struct {
	name   string
	policy twopc.UndecidedPolicy
}{{"presume-abort", twopc.PresumeAbort}, {"commit-prepared", twopc.CommitPrepared}}

// TestCrash_EveryTwoPCFailpointRecoversAtomicallyAndStably arms every twopc
// failpoint in turn (crash), runs a 4-shard transaction with $inc
// transforms through Begin → DecideOrLearn(Committed) → Resolve → Release,
// or with BeginCommit's chained write in place of the first two, until the
// injected error surfaces, then — on the same store or after a
// simulated power loss and reopen — recovers with a new coordinator under
// both policies, and proves:
//   - the failpoint fired and left exactly the state its catalog entry
//     describes (record, decision, unresolved participants);
//   - atomicity: every document of the batch shows its committed value, or
//     none does, before and after recovery, matching the decision;
//   - recovery decides an undecided transaction by its policy (the stored
//     prepare-time result for commit) and never overrides a decision;
//   - no intent and no coordinator record is left;
//   - Recover's stats match what it found;
//   - the decision, once read, never changes across further Recover calls
//     (with either policy) and crash-reopens.
func TestCrash_EveryTwoPCFailpointRecoversAtomicallyAndStably(t *testing.T) {
	if !fault.Compiled {
		t.Skip("failpoints compiled out (-tags nofailpoint)")
	}
	names := fault.Names("twopc")
	if len(names) == 0 {
		t.Fatal("no twopc failpoints in the catalog")
	}
	for _, name := range names {
		hits := fault.Hits(name)
		for _, chain := range []string{"", "staged", "direct", "once"} {
			if chain != "" && chain != "once" && testsupport.OnReferenceStore() {
				continue // chaining is engine.DB's
			}
			for _, deferRes := range []bool{false, true} {
				if chain == "once" && deferRes {
					continue // deferred resolution needs intents: CommitOnce does not apply
				}
				for _, pol := range policies {
					for _, crash := range []bool{false, true} {
						t.Run(fmt.Sprintf("%s/chain=%q/defer=%v/%s/crash=%v", name, chain, deferRes, pol.name, crash), func(t *testing.T) {
							runCrashScenario(t, name, chain, deferRes, pol.policy, crash)
						})
					}
				}
			}
		}
		if fault.Hits(name) <= hits && !(testsupport.OnReferenceStore() && strings.HasPrefix(name, "twopc/chain")) {
			t.Errorf("failpoint %s never fired", name)
		}
	}
}

// runCrashScenario runs one variant: chain "" is Begin then Decide,
// "staged" or "direct" BeginCommit's chain of that mode (chainModes), and
// "once" CommitOnce.
func runCrashScenario(t *testing.T, name, chain string, deferRes bool, policy twopc.UndecidedPolicy, crash bool) {
	ctx := context.Background()
	n := newNode(t, twopc.WithTestKnobs(twopc.Options{}, testknobs.TwoPC{DeferResolution: deferRes}))
	work.seed(t, n)
	plan := n.plan(t, work.body())
	if len(plan.Shards) != 4 {
		t.Fatalf("workload touches %d shards, want 4", len(plan.Shards))
	}
	txn := txnFor("tx", plan)
	if chain == "staged" {
		txn = txnForChain(chain, "tx", plan)
	}
	result, _ := json.Marshal(wantResult)
	committed := twopc.Committed{Result: result}

	disarm := testsupport.Arm(t, name, `return("crash")`)
	hits := fault.Hits(name)
	// A direct chain has no first link of its own to write here (no
	// beginWith): it is the decision link alone.
	links := 2
	if chain == "direct" && !deferRes {
		links = 1
	}
	step, pastDecide, flowErr := crashFlow(t, n, txn, committed, chain, links)
	disarm()
	if flowErr != nil && !errors.Is(flowErr, fault.ErrInjected) {
		t.Fatalf("%s: %v is not the injected error", step, flowErr)
	}
	fired := fault.Hits(name) > hits
	if fired != (flowErr != nil) {
		t.Fatalf("fired=%v but flow error %v", fired, flowErr)
	}

	if crash {
		n.crashReopen(t)
	} else {
		n.tables, n.coord = table.NewWithCoordinator(n.db, n.opts) // a new coordinator process on the same store
	}

	pre, err := n.coord.Lookup(ctx, "tx")
	if err != nil {
		t.Fatal(err)
	}
	expectations := crashExpectations
	switch chain {
	case "once":
		expectations = onceExpectations
	case "staged", "direct":
		expectations = chainedExpectations
	}
	exp, known := expectations[name]
	if chain == "once" && !known {
		exp, known = [2]crashExpect{}, true // not on CommitOnce's way
	}
	if !known {
		t.Errorf("no crashExpectations entry for failpoint %s: add one", name)
	} else {
		e := exp[0]
		if deferRes {
			e = exp[1]
		}
		var gotStep string
		if flowErr != nil {
			gotStep = step
		}
		if gotStep != e.step || pre.Begun != e.begun || (pre.Decision != nil) != e.decided || len(pre.Unresolved) != e.unresolved {
			t.Fatalf("left step=%q begun=%v decision=%s unresolved=%d; want %+v",
				gotStep, pre.Begun, outcomeString(pre.Decision), len(pre.Unresolved), e)
		}
	}
	if pre.Decision != nil && outcomeString(pre.Decision) != outcomeString(committed) {
		t.Fatalf("decision %s, want %s", outcomeString(pre.Decision), outcomeString(committed))
	}

	// What must be true, derived from what the failpoint left.
	var final twopc.Outcome
	switch {
	case pre.Decision != nil:
		final = pre.Decision
	case pre.Begun:
		final = twopc.PresumedOutcome(policy, result)
	}
	_, finalCommit := final.(twopc.Committed)
	released := final == nil && pastDecide
	wantState := "old"
	if finalCommit || released {
		wantState = "new"
	}
	// Reads before recovery already show the decided state (resolve-on-read).
	preState := "old"
	if _, ok := pre.Decision.(twopc.Committed); ok || released {
		preState = "new"
	}
	if got := work.state(t, n); got != preState {
		t.Fatalf("before recovery: state %s, want %s", got, preState)
	}

	stats, err := n.coord.Recover(ctx, twopc.RecoverOptions{Undecided: policy})
	if err != nil {
		t.Fatal(err)
	}
	want := twopc.RecoverStats{}
	if pre.Begun {
		want.Scanned, want.Resolved = 1, len(pre.Unresolved)
		if pre.Decision == nil {
			want.Decided = 1
			if finalCommit {
				want.Committed = 1
			} else {
				want.Aborted = 1
			}
		}
	}
	if stats != want {
		t.Fatalf("recover stats %+v, want %+v", stats, want)
	}
	assertNoIntentsOrRecords(t, n.db)

	checkFinal := func(stage string) {
		t.Helper()
		got, err := n.coord.Learn(ctx, "tx")
		if final == nil {
			if !errors.Is(err, twopc.ErrOutcomeUnknown) {
				t.Fatalf("%s: learn = %s, %v; want no decision", stage, outcomeString(got), err)
			}
		} else if err != nil || outcomeString(got) != outcomeString(final) {
			t.Fatalf("%s: learn = %s, %v; want %s", stage, outcomeString(got), err, outcomeString(final))
		}
		if s := work.state(t, n); s != wantState {
			t.Fatalf("%s: state %s, want %s", stage, s, wantState)
		}
		assertNoIntentsOrRecords(t, n.db)
	}
	checkFinal("recovered")
	for round := range 2 {
		for _, p := range policies {
			if st, err := n.coord.Recover(ctx, twopc.RecoverOptions{Undecided: p.policy}); err != nil || st != (twopc.RecoverStats{}) {
				t.Fatalf("round %d: recover again (%s) = %+v, %v; want nothing to do", round, p.name, st, err)
			}
			checkFinal(fmt.Sprintf("round %d after %s", round, p.name))
		}
		n.crashReopen(t)
		checkFinal(fmt.Sprintf("round %d reopened", round))
	}

	// The owner can finish: release the retained decision.
	if final != nil {
		if err := n.coord.Release(ctx, "tx", nil); err != nil {
			t.Fatal(err)
		}
		if s := work.state(t, n); s != wantState {
			t.Fatalf("after release: state %s", s)
		}
	}
}

// crashFlow runs the transaction until an error surfaces. It returns the
// step that failed and whether the commit was written (DecideOrLearn
// reported it, or CommitOnce wrote it).
func crashFlow(t *testing.T, n *node, txn twopc.Txn, committed twopc.Committed, chain string, links int) (string, bool, error) {
	t.Helper()
	ctx := context.Background()
	switch chain {
	case "once":
		// Nothing of the transaction is left to resolve or release.
		_, ok, err := n.coord.CommitOnce(ctx, txn, nil)
		if err == nil && !ok {
			t.Fatal("CommitOnce wrote nothing")
		}
		return "chain", ok, err
	case "staged", "direct":
		ch, ok, err := n.coord.BeginCommit(ctx, txn, nil, nil)
		if err != nil {
			return "chain", false, err
		}
		if !ok || string(ch.Result) != string(committed.Result) || ch.Decided != ch.Begun+store.Version(links-1) {
			t.Fatalf("BeginCommit: %+v, ok=%v; want a chained commit of %s", ch, ok, committed.Result)
		}
	default:
		res, err := n.coord.Begin(ctx, txn, nil)
		if err != nil {
			return "begin", false, err
		}
		if !res.Prepared {
			t.Fatalf("begin: %+v", res)
		}
		o, won, err := n.coord.DecideOrLearn(ctx, txn.ID, txn.Participants, committed, nil)
		if err != nil {
			if errors.Is(err, twopc.ErrDecisionConflict) {
				t.Fatalf("decide: %v", err)
			}
			return "decide", false, err
		}
		if !won || outcomeString(o) != outcomeString(committed) {
			t.Fatalf("decide: %s won=%v", outcomeString(o), won)
		}
	}
	if _, err := n.coord.Resolve(ctx, txn.ID); err != nil {
		return "resolve", true, err
	}
	if err := n.coord.Release(ctx, txn.ID, nil); err != nil {
		return "release", true, err
	}
	return "", true, nil
}
