package receipt

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/idemdb/idem/engine"
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
	b := new(engine.Batch)
	put := func(i int, rec *Record) {
		val, err := EncodeRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		b.Put(receiptKey(fmt.Sprintf("r%05d", i)), val)
	}
	i := 0
	for range pending {
		put(i, &Record{Schema: SchemaCurrent, State: Pending})
		i++
	}
	for range started {
		put(i, &Record{Schema: SchemaCurrent, State: Started})
		i++
	}
	for n := range terminal {
		rec := &Record{Schema: SchemaCurrent, State: Terminal}
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
}
