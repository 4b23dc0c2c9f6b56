package receipt_test

import (
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// wantMismatch asserts a 422 that claims no transaction of its own (this
// request was not applied) and reports the original receipt id in state
// (and, once terminal, outcome).
func wantMismatch(t *testing.T, a receipt.Answer, id string, state receipt.State, outcome string) {
	t.Helper()
	if a.Status != 422 || a.Code != "idempotency_key_mismatch" || a.Retryable || a.RetryWith != "none" || a.Terminal || a.Replayed ||
		a.TxnID != "" || a.Outcome != receipt.OutcomeNotApplied {
		t.Fatalf("answer %+v, want 422 idempotency_key_mismatch", a)
	}
	if o := a.Original; o == nil || o.TxnID != id || o.State != state || o.Outcome != outcome || !o.Completed.IsZero() || o.SameRequest {
		t.Fatalf("original %+v, want %s in state %s with outcome %q", a.Original, id, state, outcome)
	}
}

// TestKeyMismatch_Is422AndExecutesNothing: the same key with a different
// request is refused with 422 in every receipt state, nothing executes and
// the receipt is untouched.
func TestKeyMismatch_Is422AndExecutesNothing(t *testing.T) {
	e := newEnv(t)
	hs := &hookStore{Store: e.db}
	a := e.openOn(hs, twoWrites(receipt.Options{ExecutorMax: 1, InflightPerPrincipalMax: oneTenant}))
	createTable(t, a, "t")

	// Terminal committed.
	id := receipt.Bind("alice", "t", "k1")
	wantCommitted(t, mustExecute(t, a, req("alice", "t", "k1", incBatch(t, "k1", "ctr"))), id, false)
	_, ver := record(t, e.db, id)
	executed := a.Stats().Executed
	wantMismatch(t, mustExecute(t, a, req("alice", "t", "k1", incBatch(t, "other", "ctr"))), id, receipt.Terminal, receipt.OutcomeCommitted)
	if docExists(t, a, "t", "doc-other") || counter(t, a, "t", "ctr") != 1 || a.Stats().Executed != executed {
		t.Fatal("a mismatched request executed")
	}
	if _, v := record(t, e.db, id); v != ver {
		t.Fatal("the mismatch changed the receipt")
	}

	// Terminal not_applied.
	nid := receipt.Bind("alice", "nope", "k2")
	if a := mustExecute(t, a, req("alice", "nope", "k2", incBatch(t, "k2", "ctr"))); a.Code != "table_not_found" {
		t.Fatalf("missing table: %+v", a)
	}
	wantMismatch(t, mustExecute(t, a, req("alice", "nope", "k2", incBatch(t, "zzz", "ctr"))), nid, receipt.Terminal, receipt.OutcomeNotApplied)

	// Pending (executor full) and started (execution blocked).
	bid := receipt.Bind("alice", "t", "busy")
	g, busy := occupyExecutor(t, a, hs, "ctr")
	pid := receipt.Bind("alice", "t", "k3")
	if ans := mustExecute(t, a, req("alice", "t", "k3", incBatch(t, "k3", "ctr"))); ans.State != receipt.Pending {
		t.Fatalf("want a pending receipt: %+v", ans)
	}
	_, pver := record(t, e.db, pid)
	wantMismatch(t, mustExecute(t, a, req("alice", "t", "k3", incBatch(t, "k3-other", "ctr"))), pid, receipt.Pending, "")
	wantMismatch(t, mustExecute(t, a, req("alice", "t", "busy", incBatch(t, "busy-other", "ctr"))), bid, receipt.Started, "")
	if _, v := record(t, e.db, pid); v != pver {
		t.Fatal("the mismatch changed the pending receipt")
	}
	g.open()
	awaitResult(t, busy)
	if _, err := a.MaintainOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := counter(t, a, "t", "ctr"); got != 3 {
		t.Fatalf("counter %d, want 3 (k1, busy, k3 once each)", got)
	}
	for _, doc := range []string{"doc-other", "doc-zzz", "doc-k3-other", "doc-busy-other"} {
		if docExists(t, a, "t", doc) {
			t.Fatalf("%s exists", doc)
		}
	}
	if got := a.Stats().Mismatches; got != 4 {
		t.Fatalf("%d mismatches counted", got)
	}
}

// TestPrincipalIsolation_SameKeyTwoPrincipalsTwoReceipts: the same key from
// two principals, each on its own table "t", binds two transaction IDs, two
// receipts and two executions; each replays its own envelope.
func TestPrincipalIsolation_SameKeyTwoPrincipalsTwoReceipts(t *testing.T) {
	e := newEnv(t)
	a := e.open(receipt.Options{})
	createTable(t, a, "t")
	createTableFor(t, a, "bob", "t")
	ra := req("alice", "t", "same-key", incBatch(t, "x", "ctr"))
	rb := req("bob", "t", "same-key", incBatch(t, "x", "ctr"))
	ia, ib := receipt.Bind("alice", "t", "same-key"), receipt.Bind("bob", "t", "same-key")
	if ia == ib {
		t.Fatal("two principals bound the same txn id")
	}
	wantCommitted(t, mustExecute(t, a, ra), ia, false)
	wantCommitted(t, mustExecute(t, a, rb), ib, false)
	if ca, cb := counterOf(t, a, "alice", "t", "ctr"), counterOf(t, a, "bob", "t", "ctr"); ca != 1 || cb != 1 {
		t.Fatalf("counters %d and %d, want one execution in each principal's table", ca, cb)
	}
	wantCommitted(t, mustExecute(t, a, ra), ia, true)
	wantCommitted(t, mustExecute(t, a, rb), ib, true)
	if ra, rb := view(t, a, "alice", "t", "same-key"), view(t, a, "bob", "t", "same-key"); ra.TxnID != ia || rb.TxnID != ib {
		t.Fatalf("lookups %s %s", ra.TxnID, rb.TxnID)
	}
	// Binding is length-prefixed: shifting bytes between fields never collides.
	if receipt.Bind("ab", "c", "d") == receipt.Bind("a", "bc", "d") || receipt.Bind("a", "b", "cd") == receipt.Bind("a", "bc", "d") {
		t.Fatal("binding collides across field boundaries")
	}
}

// TestNotApplied_MissingTableReplaysIdenticallyAfterCreate: a deterministic
// pre-execution failure is terminal; after the table is created — and after
// a restart — the same key replays the identical 404 table_not_found.
func TestNotApplied_MissingTableReplaysIdenticallyAfterCreate(t *testing.T) {
	e := newEnv(t)
	a := e.open(receipt.Options{})
	r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
	id := receipt.Bind("alice", "t", "k1")
	first := mustExecute(t, a, r)
	if !first.Terminal || first.Replayed || first.Status != 404 || first.Code != "table_not_found" || first.Outcome != receipt.OutcomeNotApplied ||
		first.Retryable || first.RetryWith != "new_key" || first.TxnID != id || first.Message != `table "t" does not exist` {
		t.Fatalf("first answer %+v", first)
	}
	if a.Active().Len() != 0 {
		t.Fatal("a not_applied receipt is in the active set")
	}
	rec, _ := record(t, e.db, id)
	if rec.State != receipt.Terminal || rec.Request != nil || rec.Owner != nil || len(rec.Fingerprint) != 32 {
		t.Fatalf("record %+v", rec)
	}
	if st, _ := lease.Read(ctx, e.db, id); st.ClaimVersion != 0 {
		t.Fatal("a not_applied receipt has a lease")
	}
	createTable(t, a, "t")
	again := mustExecute(t, a, r)
	if !again.Replayed {
		t.Fatalf("after create: %+v", again)
	}
	wantSameEnvelope(t, again.Envelope, first.Envelope)
	if docExists(t, a, "t", "doc-k1") {
		t.Fatal("the not_applied batch executed after the table appeared")
	}
	a.Close()
	e.crash()
	b := e.open(receipt.Options{})
	wantSameEnvelope(t, mustExecute(t, b, r).Envelope, first.Envelope)
}

// TestRetention_ExpiredReceiptIsCleanedAndKeyExecutesAgain: after its
// retention a terminal receipt is deleted (with its retained decision) and,
// with tombstones opted out, the same key is a new request
// (tombstone_test.go: by default it is refused).
func TestRetention_ExpiredReceiptIsCleanedAndKeyExecutesAgain(t *testing.T) {
	e := newEnv(t)
	a := e.open(receipt.Options{Retention: time.Hour, TombstoneRetention: -1})
	createTable(t, a, "t")
	r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
	id := receipt.Bind("alice", "t", "k1")
	wantCommitted(t, mustExecute(t, a, r), id, false)

	e.clock.Advance(time.Hour - time.Second)
	if n, err := a.CleanOnce(ctx); n != 0 || err != nil {
		t.Fatalf("clean before retention ended: %d %v", n, err)
	}
	wantCommitted(t, mustExecute(t, a, r), id, true)
	e.clock.Advance(2 * time.Second)
	if n, err := a.CleanOnce(ctx); n != 1 || err != nil {
		t.Fatalf("clean after retention: %d %v", n, err)
	}
	if receiptExists(t, e.db, id) {
		t.Fatal("receipt survived cleaning")
	}
	if _, err := e.db.Get(ctx, decisionKey(id)); err == nil {
		t.Fatal("the retained decision survived its receipt")
	}
	ans := mustExecute(t, a, r)
	wantCommitted(t, ans, id, false)
	if got := counter(t, a, "t", "ctr"); got != 2 {
		t.Fatalf("counter %d, want 2", got)
	}
	if a.Stats().Cleaned != 1 {
		t.Fatalf("cleaned %d", a.Stats().Cleaned)
	}
}

// TestDebt_VisibilityDebtPinsReceiptUntilPaid: with deferred resolution a
// committed receipt keeps visibility debt (and its lease) and is never
// cleaned, even past retention, until maintenance resolves its intents;
// the next cleaner pass deletes it.
func TestDebt_VisibilityDebtPinsReceiptUntilPaid(t *testing.T) {
	e := newEnv(t)
	a := e.open(receipt.WithTestKnobs(receipt.Options{Retention: time.Hour}, testknobs.Receipt{DeferResolution: true}))
	createTable(t, a, "t")
	r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
	id := receipt.Bind("alice", "t", "k1")
	wantCommitted(t, mustExecute(t, a, r), id, false)
	rec, _ := record(t, e.db, id)
	if rec.State != receipt.Terminal || rec.Debt&receipt.VisibilityDebt == 0 {
		t.Fatalf("record %v debt %v, want terminal with visibility debt", rec.State, rec.Debt)
	}
	if a.Active().Len() != 1 {
		t.Fatal("a receipt with debt left the active set")
	}
	// Reads see the committed batch although intents are unresolved.
	if got := counter(t, a, "t", "ctr"); got != 1 {
		t.Fatalf("counter %d", got)
	}
	wantCommitted(t, mustExecute(t, a, r), id, true)

	e.clock.Advance(3 * time.Hour)
	for i := 0; i < 2; i++ {
		if n, err := a.CleanOnce(ctx); n != 0 || err != nil {
			t.Fatalf("clean with debt: %d %v", n, err)
		}
	}
	if !receiptExists(t, e.db, id) {
		t.Fatal("a receipt with debt was cleaned")
	}
	ms, err := a.MaintainOnce(ctx)
	if err != nil || ms.DebtPaid != 1 {
		t.Fatalf("maintenance: %+v %v", ms, err)
	}
	rec, _ = record(t, e.db, id)
	if rec.Debt != 0 || rec.Owner != nil {
		t.Fatalf("after paying: debt %v owner %v", rec.Debt, rec.Owner)
	}
	if st, _ := lease.Read(ctx, e.db, id); st.ClaimVersion != 0 || a.Active().Len() != 0 {
		t.Fatal("a debt-free terminal receipt still holds a lease")
	}
	if items, _ := e.db.Scan(ctx, []byte(store.NSIntent), store.PrefixEnd([]byte(store.NSIntent)), 10); len(items) != 0 {
		t.Fatalf("%d intents left", len(items))
	}
	if n, err := a.CleanOnce(ctx); n != 1 || err != nil {
		t.Fatalf("clean after paying: %d %v", n, err)
	}
	if receiptExists(t, e.db, id) {
		t.Fatal("not cleaned")
	}
	if got := counter(t, a, "t", "ctr"); got != 1 {
		t.Fatalf("counter %d", got)
	}
}

// TestDebt_StartedReceiptIsNeverCleaned: execution debt (started, no
// terminal) pins a receipt however long past its retention; once recovery
// makes it terminal it is retained for a full period from then.
func TestDebt_StartedReceiptIsNeverCleaned(t *testing.T) {
	e := newEnv(t)
	a := e.open(receipt.WithTestKnobs(receipt.Options{Retention: time.Hour}, testknobs.Receipt{SeparateDecide: true}))
	createTable(t, a, "t")
	r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
	id := receipt.Bind("alice", "t", "k1")
	disarm := testsupport.Arm(t, fault.ReceiptDecideBefore, `return("crash")`)
	if _, err := a.Execute(ctx, r); err == nil {
		t.Fatal("no injected crash")
	}
	disarm()
	e.clock.Advance(48 * time.Hour)
	if n, err := a.CleanOnce(ctx); n != 0 || err != nil {
		t.Fatalf("clean: %d %v", n, err)
	}
	if rec, _ := record(t, e.db, id); rec.State != receipt.Started {
		t.Fatalf("receipt %v", rec.State)
	}
	ms, err := a.MaintainOnce(ctx)
	if err != nil || ms.Terminal != 1 {
		t.Fatalf("maintenance: %+v %v", ms, err)
	}
	e.clock.Advance(time.Hour - time.Second)
	if n, _ := a.CleanOnce(ctx); n != 0 {
		t.Fatal("cleaned before a full retention period after completion")
	}
	wantCommitted(t, mustExecute(t, a, r), id, true)
	e.clock.Advance(2 * time.Second)
	if n, err := a.CleanOnce(ctx); n != 1 || err != nil {
		t.Fatalf("clean after retention: %d %v", n, err)
	}
	if got := counter(t, a, "t", "ctr"); got != 1 {
		t.Fatalf("counter %d", got)
	}
}

// TestActiveSet_ImmutableReceiptsLeaveAndCostNoRenewals: committed, aborted
// and not_applied receipts are not in the active set, so ticking the
// supervisor writes nothing; a pending receipt is in it until it is run.
func TestActiveSet_ImmutableReceiptsLeaveAndCostNoRenewals(t *testing.T) {
	e := newEnv(t)
	hs := &hookStore{Store: e.db}
	a := e.openOn(hs, twoWrites(receipt.Options{ExecutorMax: 1, InflightPerPrincipalMax: oneTenant}))
	createTable(t, a, "t")
	if ans := mustExecute(t, a, req("alice", "t", "c", incBatch(t, "c", "ctr"))); ans.Outcome != receipt.OutcomeCommitted {
		t.Fatalf("commit: %+v", ans)
	}
	if a.Active().Len() != 0 {
		t.Fatal("committed receipt in the active set")
	}
	voteNo(hs, "alice", "t")
	wantVotedNo(t, mustExecute(t, a, req("alice", "t", "x", conflictBatch(t, "X"))), receipt.Bind("alice", "t", "x"))
	hs.clear()
	if a.Active().Len() != 0 {
		t.Fatal("aborted receipt in the active set")
	}
	if ans := mustExecute(t, a, req("alice", "nope", "n", incBatch(t, "n", "ctr"))); ans.Outcome != receipt.OutcomeNotApplied {
		t.Fatalf("not_applied: %+v", ans)
	}
	if a.Active().Len() != 0 {
		t.Fatal("not_applied receipt in the active set")
	}
	writes := a.Supervisor().Stats().Writes
	for i := 0; i < 5; i++ {
		e.step(renewI, 1)
	}
	if got := a.Supervisor().Stats().Writes - writes; got != 0 {
		t.Fatalf("%d renewal writes with only immutable receipts", got)
	}

	// Pending: in the set (and renewed) until maintenance runs it.
	g, busy := occupyExecutor(t, a, hs, "ctr")
	if ans := mustExecute(t, a, req("alice", "t", "p", incBatch(t, "p", "ctr"))); ans.State != receipt.Pending {
		t.Fatalf("pending: %+v", ans)
	}
	if a.Active().Len() != 2 {
		t.Fatalf("active %d, want 2", a.Active().Len())
	}
	g.open()
	awaitResult(t, busy)
	if a.Active().Len() != 1 {
		t.Fatalf("active %d, want the pending receipt only", a.Active().Len())
	}
	if _, err := a.MaintainOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if a.Active().Len() != 0 {
		t.Fatalf("active %d after the pending receipt ran", a.Active().Len())
	}
	writes = a.Supervisor().Stats().Writes
	for i := 0; i < 3; i++ {
		e.step(renewI, 1)
	}
	if got := a.Supervisor().Stats().Writes - writes; got != 0 {
		t.Fatalf("%d renewal writes after every receipt became immutable", got)
	}
}

// TestOptions_RenewIntervalIsClampedToAThirdOfTheTTL: a configured renewal
// interval longer than TTL/3 is clamped, so a lease gets at least three
// renewal chances before it expires.
func TestOptions_RenewIntervalIsClampedToAThirdOfTheTTL(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ in, want time.Duration }{
		{time.Hour, ttl / 3}, {ttl / 3, ttl / 3}, {time.Second, time.Second}, {-1, ttl / 3},
	} {
		svc := e.open(receipt.Options{RenewInterval: c.in})
		if got := svc.Supervisor().Interval(); got != c.want {
			t.Errorf("RenewInterval %v: supervisor interval %v, want %v", c.in, got, c.want)
		}
		svc.Close()
	}
}
