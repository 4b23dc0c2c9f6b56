package twopc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs/memfs"
)

// Internal tests of Resolve's bound and of the invariant "a decided record
// never changes", asserted where decisions are written
// (checkDecisionWrites) and where Resolve reads them back
// (checkDecisionStood). Each builds the violation by hand.

// intentPart is a participant holding one intent key: Prepare writes it,
// Resolve deletes it (and, on commit, writes the document).
type intentPart struct {
	id    string
	store store.Store
}

func (p intentPart) ID() string  { return p.id }
func (p intentPart) Ref() []byte { return []byte(p.id) }
func (p intentPart) intent() []byte {
	return store.NSIntent.Key("t", p.id)
}

func (p intentPart) Prepare(context.Context, string) (*store.Batch, error) {
	return new(store.Batch).Absent(p.intent()).Put(p.intent(), []byte("staged")), nil
}

func (p intentPart) Resolve(ctx context.Context, _ string, commit bool) (*store.Batch, error) {
	it, err := p.store.Get(ctx, p.intent())
	if errors.Is(err, store.ErrNotFound) {
		return new(store.Batch), nil
	}
	if err != nil {
		return nil, err
	}
	b := new(store.Batch).AtVersion(p.intent(), it.Version).Delete(p.intent())
	if commit {
		b.Put(store.NSTable.Key("t", p.id), []byte("doc"))
	}
	return b, nil
}

func (intentPart) Refusal([]byte) (*code.Error, bool, bool) { return nil, false, false }

// decidedTxn opens a store and leaves txn "t1" with participants a and b
// begun and decided Committed, its intents unresolved (DeferResolution).
func decidedTxn(t *testing.T) *engine.DB {
	t.Helper()
	db, err := engine.Open("/data", engine.Options{FS: memfs.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c := New(db, resolverOver(db), WithTestKnobs(Options{}, testknobs.TwoPC{DeferResolution: true}))
	ctx := context.Background()
	txn := Txn{ID: "t1", Participants: []Participant{intentPart{"a", db}, intentPart{"b", db}}}
	if res, err := c.Begin(ctx, txn, nil); err != nil || !res.Prepared {
		t.Fatalf("begin: %+v %v", res, err)
	}
	if err := c.Decide(ctx, "t1", nil, Committed{}, nil); err != nil {
		t.Fatal(err)
	}
	return db
}

func resolverOver(st store.Store) Resolver {
	return func(ref []byte) (Participant, error) { return intentPart{string(ref), st}, nil }
}

// refusingStore fails every Apply on the batch's first condition, as if
// another writer always got there first; reads go through.
type refusingStore struct {
	store.Store
	applies int
}

// Capabilities implements store.Store: none, as the embedded interface
// alone would not hide them (its Capabilities would be the inner store's,
// around this wrapper).
func (s *refusingStore) Capabilities() store.Capabilities { return store.Capabilities{} }

func (s *refusingStore) Apply(_ context.Context, b *store.Batch) (store.Version, error) {
	s.applies++
	return 0, &store.ConditionError{Cond: b.Conds[0], Found: 1}
}

// TestResolve_GivesUpAfterResolveConflictsMax: on a store where every write
// fails its condition, Resolve stops after ResolveConflictsMax attempts with
// ErrResolveContended, having written nothing; Recover counts the
// transaction deferred and goes on; a later Resolve on a working store
// finishes the job.
func TestResolve_GivesUpAfterResolveConflictsMax(t *testing.T) {
	db := decidedTxn(t)
	ctx := context.Background()
	refusing := &refusingStore{Store: db}
	n, err := New(refusing, resolverOver(refusing), WithTestKnobs(Options{}, testknobs.TwoPC{DeferResolution: true})).Resolve(ctx, "t1")
	if !errors.Is(err, ErrResolveContended) || n != 0 {
		t.Fatalf("resolve on a refusing store: %d, %v; want 0, ErrResolveContended", n, err)
	}
	if errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("%v: the bound's error is its own class, not a condition failure", err)
	}
	if refusing.applies != ResolveConflictsMax {
		t.Fatalf("%d writes attempted, want exactly ResolveConflictsMax = %d", refusing.applies, ResolveConflictsMax)
	}
	if _, err := db.Get(ctx, recordKey("t1")); err != nil {
		t.Fatalf("the coordinator record must stand for a later Resolve: %v", err)
	}
	refusing.applies = 0
	st, err := New(refusing, resolverOver(refusing), WithTestKnobs(Options{}, testknobs.TwoPC{DeferResolution: true})).Recover(ctx, RecoverOptions{})
	if err != nil || st.Deferred != 1 || st.Resolved != 0 || refusing.applies != ResolveConflictsMax {
		t.Fatalf("recover on a refusing store: %+v, %v after %d writes; want one deferred after %d", st, err, refusing.applies, ResolveConflictsMax)
	}
	if n, err := New(db, resolverOver(db), WithTestKnobs(Options{}, testknobs.TwoPC{DeferResolution: true})).Resolve(ctx, "t1"); err != nil || n != 2 {
		t.Fatalf("a later resolve: %d, %v; want 2, nil", n, err)
	}
}

// rewritingStore overwrites the decision of txnID — unconditionally, as no
// code of this package may — just before the first write that is
// conditioned on it, then lets that write go on.
type rewritingStore struct {
	*engine.DB
	txnID string
	done  bool
}

func (s *rewritingStore) Apply(ctx context.Context, b *store.Batch) (store.Version, error) {
	if !s.done && conditionsOn(b, decisionKey(s.txnID)) {
		s.done = true
		val, err := encodeDecision(Aborted{Code: code.TransactionAborted, Message: "rewritten"}, 1)
		if err != nil {
			return 0, err
		}
		if _, err := s.DB.Apply(ctx, new(store.Batch).Put(decisionKey(s.txnID), val)); err != nil {
			return 0, err
		}
	}
	return s.DB.Apply(ctx, b)
}

func conditionsOn(b *store.Batch, key []byte) bool {
	for _, c := range b.Conds {
		if string(c.Key) == string(key) {
			return true
		}
	}
	return false
}

// TestResolve_DecisionChangedUnderStandingRecordIsAnError: a decision that
// changes while its coordinator record stands is reported as
// ErrDecisionChanged, and Resolve writes nothing with the outcome it had
// read.
func TestResolve_DecisionChangedUnderStandingRecordIsAnError(t *testing.T) {
	db := decidedTxn(t)
	ctx := context.Background()
	st := &rewritingStore{DB: db, txnID: "t1"}
	n, err := New(st, resolverOver(st), WithTestKnobs(Options{}, testknobs.TwoPC{DeferResolution: true})).Resolve(ctx, "t1")
	if !errors.Is(err, ErrDecisionChanged) || n != 0 {
		t.Fatalf("resolve: %d, %v; want 0, ErrDecisionChanged", n, err)
	}
	if !strings.Contains(err.Error(), "invariant broken: a decided record changed") {
		t.Fatalf("%v: the error must name the invariant", err)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := db.Get(ctx, intentPart{id, db}.intent()); err != nil {
			t.Fatalf("intent %s was resolved after the decision changed: %v", id, err)
		}
		if _, err := db.Get(ctx, store.NSTable.Key("t", id)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("document %s was committed after the decision changed: %v", id, err)
		}
	}
}

// TestCheckDecisionStood_OnlyAStandingRecordMakesAChangeAViolation: when the
// record moved too (resolved, or released and begun again), a decision
// that is gone is an ordinary conflict.
func TestCheckDecisionStood_OnlyAStandingRecordMakesAChangeAViolation(t *testing.T) {
	db := decidedTxn(t)
	ctx := context.Background()
	c := New(db, resolverOver(db), WithTestKnobs(Options{}, testknobs.TwoPC{DeferResolution: true}))
	it, err := db.Get(ctx, recordKey("t1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.checkDecisionStood(ctx, "t1", it.Version, 1); !errors.Is(err, ErrDecisionChanged) {
		t.Fatalf("record unchanged: %v, want ErrDecisionChanged", err)
	}
	if err := c.checkDecisionStood(ctx, "t1", it.Version-1, 1); err != nil {
		t.Fatalf("record moved: %v, want nil", err)
	}
	if err := c.checkDecisionStood(ctx, "t2", 1, 1); err != nil {
		t.Fatalf("record gone: %v, want nil", err)
	}
}

// TestDecisionWrites_PanicOnAnyWriteThatWouldChangeADecision: a batch that
// puts a decision without requiring it absent, or deletes one without
// requiring its coordinator record absent, panics before it is written —
// whether the batch is the coordinator's or a caller's `with`.
func TestDecisionWrites_PanicOnAnyWriteThatWouldChangeADecision(t *testing.T) {
	db := decidedTxn(t)
	ctx := context.Background()
	c := New(db, resolverOver(db), WithTestKnobs(Options{}, testknobs.TwoPC{DeferResolution: true}))
	const invariant = "invariant broken: a decided record never changes"

	overwrite := new(store.Batch).Put(decisionKey("t1"), []byte("x"))
	testsupport.MustPanic(t, invariant, func() { _ = c.Decide(ctx, "t9", nil, Committed{}, overwrite) })
	testsupport.MustPanic(t, invariant, func() { _ = c.Release(ctx, "t9", overwrite) })
	early := new(store.Batch).Delete(decisionKey("t1")) // its record still stands
	testsupport.MustPanic(t, invariant, func() { _ = c.Decide(ctx, "t9", nil, Committed{}, early) })
	testsupport.MustPanic(t, invariant, func() {
		_, _ = c.Begin(ctx, Txn{ID: "t9", Participants: []Participant{intentPart{"c", db}}}, early)
	})
	if _, err := db.Get(ctx, decisionKey("t9")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused batch was written: %v", err)
	}
	if o, err := c.Learn(ctx, "t1"); err != nil || o.(Committed).Result != nil {
		t.Fatalf("t1's decision: %v %v, want it unchanged", o, err)
	}

	// What the package writes itself passes: create-if-absent, and the
	// release that requires the record gone.
	checkDecisionWrites(new(store.Batch).Absent(decisionKey("t2")).Put(decisionKey("t2"), []byte("x")))
	checkDecisionWrites(ReleaseInto(new(store.Batch), "t2"))
	if err := c.Decide(ctx, "t9", nil, Committed{}, ReleaseInto(new(store.Batch), "t8")); err != nil {
		t.Fatalf("a with that releases another transaction: %v", err)
	}
}
