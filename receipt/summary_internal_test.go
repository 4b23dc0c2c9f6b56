package receipt

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/store"
)

// TestSummary_CountsEveryReceiptByState: Summary counts receipts in every
// state across more than one scan page, counts terminal receipts with
// visibility debt separately, reports an undecodable record instead of
// failing, and reads nothing but receipts (the other namespaces' keys are
// not counted).
func TestSummary_CountsEveryReceiptByState(t *testing.T) {
	ctx := context.Background()
	db, clock := internalStore(t)
	svc, err := Open(ctx, db, Options{Clock: clock, MaintainInterval: -1, CleanInterval: -1,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	empty, err := svc.Summary(ctx)
	if err != nil || empty != (Summary{}) {
		t.Fatalf("empty store: %+v %v", empty, err)
	}
	const pending, started, debt = 3, 2, 1
	terminal := summaryPageMax + 5 // more than one page
	b := new(store.Batch)
	put := func(i int, rec *Record) {
		val, err := EncodeRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		b.Put(receiptKey(fmt.Sprintf("r%05d", i)), val)
	}
	i := 0
	for range pending {
		put(i, wellFormed(Pending))
		i++
	}
	for range started {
		put(i, wellFormed(Started))
		i++
	}
	for n := range terminal {
		rec := wellFormed(Terminal)
		if n < debt {
			rec.Debt = VisibilityDebt
		}
		put(i, rec)
		i++
	}
	b.Put(receiptKey("zz-garbage"), []byte{0xff})
	if _, err := db.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	got, err := svc.Summary(ctx)
	want := Summary{Pending: pending, Started: started, Terminal: terminal, Debt: debt, Unreadable: 1}
	if err != nil || got != want {
		t.Fatalf("summary %+v %v, want %+v", got, err, want)
	}

	// With the terminal receipts in the value log, the same counts, and
	// not one of them read: every value-log byte is damaged first.
	dir := t.TempDir()
	cold, err := engine.Open(dir, engine.Options{Logger: slog.New(slog.DiscardHandler), ColdValue: ColdValue})
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close()
	if _, err := cold.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := cold.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "vlog", "*.vlog"))
	for _, seg := range segs {
		raw, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		for i := range raw {
			raw[i] ^= 0xff
		}
		if err := os.WriteFile(seg, raw, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if len(segs) == 0 || cold.Stats().ValueLog.Live == 0 {
		t.Fatalf("nothing went to the value log: %v %+v", segs, cold.Stats().ValueLog)
	}
	svc2, err := Open(ctx, cold, Options{Clock: clock, MaintainInterval: -1, CleanInterval: -1,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer svc2.Close()
	if got, err := svc2.Summary(ctx); err != nil || got != want {
		t.Fatalf("summary over the value log %+v %v, want %+v", got, err, want)
	}
}
