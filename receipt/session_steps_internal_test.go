package receipt

import (
	"context"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
	"github.com/idemdb/idem/table"
)

// TestSessionSteps_EachStepLogsWhatItChangedAndFoldsBack: ten stages of
// one document each store ten steps of one document each — each document
// once, not the whole staging again at every step — and the staging
// folded back from the steps (what a holder that lost its cached copy
// reads) is the one the holder kept. After the commit no step is left.
func TestSessionSteps_EachStepLogsWhatItChangedAndFoldsBack(t *testing.T) {
	ctx := context.Background()
	db, clock := internalStore(t)
	s, err := Open(ctx, db, Options{Node: "node-0", Clock: clock, MaintainInterval: -1, CleanInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Tables().Create(ctx, "p", "t", 0); err != nil {
		t.Fatal(err)
	}
	sess, err := s.BeginSession(ctx, "p", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		b, _ := table.DecodeBatch([]byte(`{"inserts":[{"id":"d` + string(rune('0'+i)) + `","doc":{"n":` + string(rune('0'+i)) + `}}]}`))
		if _, _, err := s.StageSession(ctx, "p", sess.ID, []TableBatch{{Table: "t", Batch: b}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ReadSession(ctx, "p", sess.ID, "t", "d3"); err != nil { // its own write: no step
		t.Fatal(err)
	}
	prefix := sessionStepPrefix(sess.ID)
	steps, err := db.Scan(ctx, prefix, store.PrefixEnd(prefix), 100)
	if err != nil || len(steps) != 10 {
		t.Fatalf("%d steps stored (%v), want 10", len(steps), err)
	}
	for _, it := range steps {
		var docs []table.SessionDoc
		if err := cbor.Unmarshal(it.Value, &docs); err != nil || len(docs) != 1 {
			t.Fatalf("step %s holds %d documents (%v), want the one it changed", it.Key, len(docs), err)
		}
	}
	mu := s.sess.lockSession(sess.ID)
	sa, _, err := s.sess.holdSession(ctx, "p", sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := s.sess.staging(ctx, sa)
	if err != nil {
		t.Fatal(err)
	}
	s.sess.stagings.drop(sess.ID)
	folded, err := s.sess.staging(ctx, sa)
	mu.Unlock()
	if err != nil || !reflect.DeepEqual(kept.Clone().Docs, folded.Clone().Docs) || kept.Result != folded.Result || kept.Bytes != folded.Bytes {
		t.Fatalf("folded staging %+v (%v), kept %+v", folded, err, kept)
	}
	if ans, err := s.CommitSession(ctx, CommitRequest{Principal: "p", Session: sess.ID}); err != nil || ans.Outcome != OutcomeCommitted {
		t.Fatalf("commit: %+v %v", ans, err)
	}
	if left, _ := db.Scan(ctx, prefix, store.PrefixEnd(prefix), 100); len(left) != 0 {
		t.Fatalf("%d steps left after the commit", len(left))
	}
}

// TestSessionSteps_TooManyForTheEndingWriteAreDeletedLater: on a store
// whose ops limit lets an ending write take only a few steps, a longer
// session's steps outlive the write that aborts it; maintenance deletes
// them from its queue — and when a restart lost the queue, the cleaner
// deletes them with the record, after its retention.
func TestSessionSteps_TooManyForTheEndingWriteAreDeletedLater(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "maintenance", true: "cleaner after a restart"}[restart], func(t *testing.T) {
			ctx := context.Background()
			_, clock := internalStore(t)
			st := memstore.NewWithLimits(store.Limits{ApplyOpsMax: 64, ApplyCondsMax: 64, ApplyBytesMax: 1 << 20, ScanItemsMax: 1000})
			opts := Options{Node: "node-0", Clock: clock, Retention: time.Hour, MaintainInterval: -1, CleanInterval: -1, Logger: slog.New(slog.DiscardHandler)}
			s, err := Open(ctx, st, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.sess.stepsInlineMax() != 16 {
				t.Fatalf("inline steps %d, want 16 (a quarter of 64 ops)", s.sess.stepsInlineMax())
			}
			if _, _, err := s.Tables().Create(ctx, "p", "t", 0); err != nil {
				t.Fatal(err)
			}
			sess, err := s.BeginSession(ctx, "p", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 20; i++ {
				b, _ := table.DecodeBatch([]byte(`{"inserts":[{"id":"d` + string(rune('a'+i)) + `","doc":{}}]}`))
				if _, _, err := s.StageSession(ctx, "p", sess.ID, []TableBatch{{Table: "t", Batch: b}}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.AbortSession(ctx, "p", sess.ID); err != nil {
				t.Fatal(err)
			}
			prefix := sessionStepPrefix(sess.ID)
			steps := func() int {
				items, err := st.Scan(ctx, prefix, store.PrefixEnd(prefix), 100)
				if err != nil {
					t.Fatal(err)
				}
				return len(items)
			}
			if n := steps(); n != 20 {
				t.Fatalf("%d steps after the abort, want all 20 left to delete later", n)
			}
			if restart {
				s.Close()
				if s, err = Open(ctx, st, opts); err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if _, err := s.MaintainOnce(ctx); err != nil || steps() != 20 {
					t.Fatalf("maintenance of the new incarnation: %v, %d steps (its queue is empty)", err, steps())
				}
				clock.Advance(time.Hour + time.Second)
				if n, err := s.CleanOnce(ctx); err != nil || n != 1 {
					t.Fatalf("cleaner: %d %v", n, err)
				}
			} else if _, err := s.MaintainOnce(ctx); err != nil {
				t.Fatal(err)
			}
			if n := steps(); n != 0 {
				t.Fatalf("%d steps left", n)
			}
		})
	}
}
