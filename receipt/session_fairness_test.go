package receipt_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// TestMaintenance_RecoversBothKindsFairly (docs/design.md §14: recovery after a
// crash treats sessions and receipts fairly): a dead owner leaves 10 000
// items of one kind and 10 of the other. The successor's first recovery
// pass — bounded at receipt.MaintainReceiptsMax entries — finishes all 10
// of the few, whichever kind they are, because the kinds share the pass
// page by page instead of one kind's backlog coming first.
func TestMaintenance_RecoversBothKindsFairly(t *testing.T) {
	const many, few = 10000, 10
	t.Run("10 receipts behind 10000 sessions", func(t *testing.T) {
		e := newEnv(t)
		a := e.open(receipt.WithTestKnobs(receipt.Options{Node: "node-0", SessionsOpenMax: 2 * many, SessionsPerPrincipalMax: 2 * many}, testknobs.Receipt{SeparateDecide: true}))
		createTable(t, a, "t")
		for i := 0; i < many; i++ {
			if _, err := a.BeginSession(ctx, alice, 5*time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		disarm := testsupport.Arm(t, fault.ReceiptDecideBefore, `return("crash")`)
		for i := 0; i < few; i++ {
			key := fmt.Sprintf("k%d", i)
			if ans, err := a.Execute(ctx, req(alice, "t", key, incBatch(t, key, "ctr-"+key))); !errors.Is(err, fault.ErrInjected) {
				t.Fatalf("Execute: %+v %v, want the injected crash", ans, err)
			}
		}
		disarm()
		a.Close()
		b := e.open(receipt.Options{Node: "node-1"})
		e.clock.Advance(ttl + time.Second)
		ms, err := b.MaintainOnce(ctx)
		if err != nil || ms.Terminal != few {
			t.Fatalf("first pass: %+v %v, want all %d receipts finished", ms, err, few)
		}
		if ms.Scanned+ms.SessionsScanned > receipt.MaintainReceiptsMax || ms.SessionsEnded == 0 || ms.SessionsEnded >= many {
			t.Fatalf("first pass: %+v, want a bounded pass that also ended some, not all, sessions", ms)
		}
		for i := 0; i < few; i++ {
			if n := counter(t, b, "t", fmt.Sprintf("ctr-k%d", i)); n != 1 {
				t.Fatalf("counter of k%d is %d, want 1", i, n)
			}
		}
	})
	t.Run("10 sessions behind 10000 receipt entries", func(t *testing.T) {
		e := newEnv(t)
		a := e.open(receipt.Options{Node: "node-0"})
		var sessions []string
		for i := 0; i < few; i++ {
			sessions = append(sessions, begin(t, a, alice, 5*time.Minute))
		}
		a.Close()
		// Recovery entries of receipts that no longer exist: each is work
		// for the pass (a stray to remove), ahead of the sessions in key
		// order were the pass to walk one kind after the other.
		for i := 0; i < many; i += 500 {
			b := new(store.Batch)
			for j := i; j < i+500; j++ {
				b.Put(store.NSRecovery.Key("node-0", fmt.Sprintf("%032x", j)), nil)
			}
			if _, err := e.db.Apply(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		b := e.open(receipt.Options{Node: "node-1"})
		e.clock.Advance(ttl + time.Second)
		ms, err := b.MaintainOnce(ctx)
		if err != nil || ms.SessionsEnded != few {
			t.Fatalf("first pass: %+v %v, want all %d sessions ended", ms, err, few)
		}
		if ms.Scanned+ms.SessionsScanned > receipt.MaintainReceiptsMax || ms.Strays == 0 || ms.Strays >= many {
			t.Fatalf("first pass: %+v, want a bounded pass that also removed some, not all, strays", ms)
		}
		for _, id := range sessions {
			if info, _ := b.SessionInfo(ctx, alice, id); info.State != receipt.SessionAborted || info.Reason != receipt.ReasonOwnerLost {
				t.Fatalf("session %s: %+v", id, info)
			}
		}
	})
}
