package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/wal"
)

// The invariants the engine asserts where it writes the tree and where it
// reads the log back. Each test builds the violation by hand: a store that
// works never produces one.

func bareDB() *DB {
	db := &DB{tree: index.NewKeySpace(), pending: map[string]pendingWrite{}, dirty: newDirtySet(), opts: Options{CheckpointLogBytes: -1}}
	db.ckpts = newCheckpointer(db)
	return db
}

func putOps(key string) []store.Op { return ownOps([]store.Op{{Key: []byte(key), Value: []byte("v")}}) }

// TestApplyToTree_PanicsUnlessVersionsStrictlyIncrease: a batch at or below
// the last applied version is refused before it touches the tree.
func TestApplyToTree_PanicsUnlessVersionsStrictlyIncrease(t *testing.T) {
	db := bareDB()
	db.applyToTree(5, putOps("a"))
	for _, v := range []store.Version{5, 4} {
		testsupport.MustPanic(t, "invariant broken: versions strictly increase", func() { db.applyToTree(v, putOps("b")) })
	}
	if _, ok := db.tree.Get(index.Probe([]byte("b"))); ok {
		t.Fatal("the refused batch reached the tree")
	}
	if db.applied != 5 {
		t.Fatalf("applied = %d after refused batches, want 5", db.applied)
	}
	db.applyToTree(6, putOps("b")) // the next version still goes in
}

// TestOnDurable_PanicsUnlessEntriesStrictlyIncrease: a group whose entries
// do not follow the last durable one is refused, and the tree lock is
// released on the way out.
func TestOnDurable_PanicsUnlessEntriesStrictlyIncrease(t *testing.T) {
	db := bareDB()
	db.onDurable([]wal.Entry{{Index: 1, Tag: &applyRec{ops: putOps("a")}}, {Index: 2, Kind: wal.KindCheckpoint}})
	for _, group := range [][]wal.Entry{
		{{Index: 2, Tag: &applyRec{ops: putOps("b")}}},                                               // a repeat
		{{Index: 1, Tag: &applyRec{ops: putOps("b")}}},                                               // an older one
		{{Index: 4, Tag: &applyRec{ops: putOps("b")}}, {Index: 3, Tag: &applyRec{ops: putOps("c")}}}, // out of order within a group
	} {
		testsupport.MustPanic(t, "invariant broken: durable log entries strictly increase", func() { db.onDurable(group) })
		if !db.treeMu.TryLock() {
			t.Fatal("treeMu still held after the panic")
		}
		db.treeMu.Unlock()
	}
	if _, ok := db.tree.Get(index.Probe([]byte("c"))); ok {
		t.Fatal("an entry after the violation reached the tree")
	}
}

// TestReplay_NonContiguousEntriesAreCorruption: on read-back, a gap, a
// repeat or an early end of the replayed log is a *CorruptionError, and the
// entry is not applied.
func TestReplay_NonContiguousEntriesAreCorruption(t *testing.T) {
	body := encodeBody(nil, []store.Op{{Key: []byte("k"), Value: []byte("v")}})
	for _, tc := range []struct {
		name string
		seq  []uint64
	}{
		{"gap", []uint64{11, 13}},
		{"repeat", []uint64{11, 11}},
		{"before the checkpoint", []uint64{10}},
	} {
		r := replayer{db: bareDB(), next: 11} // a checkpoint at 10
		r.db.applied = 10
		var err error
		for _, index := range tc.seq {
			if err = r.entry(index, wal.KindBatch, body); err != nil {
				break
			}
		}
		var ce *store.CorruptionError
		if !errors.As(err, &ce) || !errors.Is(err, store.ErrCorruption) || !strings.Contains(err.Error(), "not contiguous") {
			t.Fatalf("%s: %v, want a *CorruptionError saying the entries are not contiguous", tc.name, err)
		}
		if r.db.applied > 11 {
			t.Fatalf("%s: applied %d: the entry out of sequence was applied", tc.name, r.db.applied)
		}
	}

	r := replayer{db: bareDB(), next: 1}
	for index := uint64(1); index <= 3; index++ {
		if err := r.entry(index, wal.KindBatch, body); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.reachedEnd(4); err != nil {
		t.Fatalf("a complete replay: %v", err)
	}
	if err := r.reachedEnd(6); !errors.Is(err, store.ErrCorruption) || !strings.Contains(err.Error(), "not contiguous") {
		t.Fatalf("a replay that stopped two entries early: %v, want corruption", err)
	}
}
