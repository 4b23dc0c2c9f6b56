package etcdtest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

// Properties of the layers above the store, held on etcd: reads never see
// an uncommitted intent, and a restarted node is not its predecessor. The
// checks return their violations, so that the self-test (selftest_test.go)
// can require them to catch the planted bugs on etcd.

// intentReadViolations prepares a transaction (an update, an insert, a
// delete) on a table on etcd, with resolution deferred so that its intents
// stay, and reads each document while it is undecided, once it aborted,
// and — for a second one — once it committed: the stored document until a
// commit, the committed one from the decision on.
func intentReadViolations(t *testing.T, c *etcdtest.Cluster) []string {
	t.Helper()
	tables, coord := table.NewWithCoordinator(newStore(t, c, etcdtest.Prefix(t)), twopc.WithTestKnobs(twopc.Options{}, testknobs.TwoPC{DeferResolution: true}))
	if _, _, err := tables.Create(ctx, "alice", "t", 2); err != nil {
		t.Fatal(err)
	}
	plan := func(body string) *table.Plan {
		b, err := table.DecodeBatch([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		p, err := tables.Preflight(ctx, "alice", "t", b)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := tables.ApplyFast(ctx, plan(`{"inserts":[{"id":"a","doc":{"n":1}},{"id":"b","doc":{"n":1}}]}`)); err != nil {
		t.Fatal(err)
	}
	const body = `{"inserts":[{"id":"c","doc":{"n":9}}],"deletes":["b"],"transforms":[{"id":"a","ops":[{"op":"$inc","path":"n","value":1}]}]}`
	stored := map[string]string{"a": `{"n":1}`, "b": `{"n":1}`, "c": ""}
	committed := map[string]string{"a": `{"n":2}`, "b": "", "c": `{"n":9}`}
	var out []string
	check := func(when string, docs map[string]string) {
		for id, want := range docs {
			raw, err := tables.Get(ctx, "alice", "t", id)
			got := string(raw)
			if ce := (*code.Error)(nil); errors.As(err, &ce) && ce.Code == code.DocumentNotFound {
				got = ""
			} else if err != nil {
				t.Fatalf("%s: get %s: %v", when, id, err)
			}
			if got != want {
				out = append(out, fmt.Sprintf("%s: document %s reads %q, want %q", when, id, got, want))
			}
		}
	}
	for i, o := range []twopc.Outcome{twopc.Aborted{Code: code.TransactionAborted}, twopc.Committed{}} {
		id := fmt.Sprintf("tx-%d", i)
		p := plan(body)
		parts := make([]twopc.Participant, len(p.Shards))
		for j, s := range p.Shards {
			parts[j] = s
		}
		txn := twopc.Txn{ID: id, Participants: parts, Result: func() ([]byte, error) { return json.Marshal(p.Result()) }}
		if res, err := coord.Begin(ctx, txn, nil); err != nil || !res.Prepared {
			t.Fatalf("%s: begin: %+v %v", id, res, err)
		}
		check(id+" prepared, undecided", stored)
		if _, _, err := coord.DecideOrLearn(ctx, id, nil, o, nil); err != nil {
			t.Fatalf("%s: decide: %v", id, err)
		}
		if _, ok := o.(twopc.Committed); ok {
			check(id+" committed, unresolved", committed)
		} else {
			check(id+" aborted, unresolved", stored)
			if _, err := coord.Resolve(ctx, id); err != nil { // before the next prepares the same documents
				t.Fatalf("%s: resolve: %v", id, err)
			}
		}
	}
	return out
}

// TestIsolation_AReadNeverSeesAnUncommittedIntentOnEtcd: see
// intentReadViolations.
func TestIsolation_AReadNeverSeesAnUncommittedIntentOnEtcd(t *testing.T) {
	for _, v := range intentReadViolations(t, sharedCluster(t)) {
		t.Error(v)
	}
}

// restartLocateViolations: node-a's first incarnation registers on etcd
// and dies; node-a restarts under the same node ID. The dead incarnation
// — which may still hold claims until their leases run out — has no
// address: only the live one is located, so nothing is forwarded to a
// process that does not hold what it is asked for.
func restartLocateViolations(t *testing.T, c *etcdtest.Cluster) []string {
	t.Helper()
	prefix := etcdtest.Prefix(t)
	clock := lease.NewSim(t0)
	open := func(name, adv string) *receipt.Service {
		return node(t, newStore(t, c, prefix), name, clock, receipt.Options{Advertise: adv})
	}
	old := open("node-a", "http://127.0.0.1:1/old")
	old.Close()
	restarted := open("node-a", "http://127.0.0.1:1/new")
	other := open("node-b", "http://127.0.0.1:1/b")
	var out []string
	if restarted.Owner() == old.Owner() {
		t.Fatalf("the restart kept the incarnation %s", old.Owner())
	}
	if addr, err := other.Locate(ctx, old.Owner()); err != nil || addr != "" {
		out = append(out, fmt.Sprintf("Locate(%s), a dead incarnation: %q %v, want none", old.Owner(), addr, err))
	}
	if addr, err := other.Locate(ctx, restarted.Owner()); err != nil || addr != "http://127.0.0.1:1/new" {
		out = append(out, fmt.Sprintf("Locate(%s), the live one: %q %v, want its address", restarted.Owner(), addr, err))
	}
	return out
}

// TestLayers_ARestartedNodeIsNotLocatedAsItsPredecessor: see
// restartLocateViolations.
func TestLayers_ARestartedNodeIsNotLocatedAsItsPredecessor(t *testing.T) {
	for _, v := range restartLocateViolations(t, sharedCluster(t)) {
		t.Error(v)
	}
}
