package receipt_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// TestSessionCrash_EveryDurableStepConverges: the process dies — a power
// loss of the engine, then a new incarnation — right before each durable
// step of a session: its begin, a stage, its end (abort), its commit's
// publication. Recovery converges with nothing applied and nothing left
// behind: the new incarnation's maintenance presumes the open session
// aborted (its owner is an older incarnation), no lease, open entry or
// intent survives, and a commit retried after the crash is session_aborted,
// never executed.
func TestSessionCrash_EveryDurableStepConverges(t *testing.T) {
	for _, tc := range []struct {
		point string
		op    func(t *testing.T, svc *receipt.Service, id string) error
	}{
		{fault.SessionBeginBefore, func(t *testing.T, svc *receipt.Service, _ string) error {
			_, err := svc.BeginSession(ctx, alice, time.Minute)
			return err
		}},
		{fault.SessionStageBefore, func(t *testing.T, svc *receipt.Service, id string) error {
			_, _, err := svc.StageSession(ctx, alice, id, one("t", mustBatch(t, `{"inserts":[{"id":"late","doc":{}}]}`)))
			return err
		}},
		{fault.SessionEndBefore, func(t *testing.T, svc *receipt.Service, id string) error {
			_, err := svc.AbortSession(ctx, alice, id)
			return err
		}},
		{fault.ReceiptCreateBefore, func(t *testing.T, svc *receipt.Service, id string) error {
			_, err := svc.CommitSession(ctx, receipt.CommitRequest{Principal: alice, Session: id})
			return err
		}},
	} {
		t.Run(tc.point, func(t *testing.T) {
			e := newEnv(t)
			a := e.open(receipt.Options{Node: "node-0"})
			createTable(t, a, "t")
			id := begin(t, a, alice, time.Minute)
			stage(t, a, id, "t", `{"inserts":[{"id":"early","doc":{}}]}`)

			disarm := testsupport.Arm(t, tc.point, `return("crash")`)
			if err := tc.op(t, a, id); !errors.Is(err, fault.ErrInjected) {
				t.Fatalf("%s: %v, want the injected crash", tc.point, err)
			}
			disarm()
			a.Close()
			e.crash()

			b := e.open(receipt.Options{Node: "node-0"})
			ms, err := b.MaintainOnce(ctx)
			if err != nil || ms.SessionsEnded != 1 {
				t.Fatalf("maintenance of the new incarnation: %+v %v, want the open session presumed aborted", ms, err)
			}
			info, err := b.SessionInfo(ctx, alice, id)
			if err != nil || info.State != receipt.SessionAborted || info.Reason != receipt.ReasonOwnerLost {
				t.Fatalf("session after the crash: %+v %v", info, err)
			}
			if ans, err := b.CommitSession(ctx, receipt.CommitRequest{Principal: alice, Session: id}); err != nil || ans.Code != code.SessionAborted {
				t.Fatalf("commit retried after the crash: %+v %v", ans, err)
			}
			for _, doc := range []string{"early", "late"} {
				if docExists(t, b, "t", doc) {
					t.Fatalf("document %s of a session that never committed exists", doc)
				}
			}
			if st, _ := lease.Read(ctx, e.db, id); st.ClaimVersion != 0 || st.ExpiryVersion != 0 {
				t.Fatalf("the ended session's lease survived: %+v", st)
			}
			for _, p := range [][]byte{store.NSSession.Prefix("open"), []byte(store.NSIntent), []byte(store.NSRecovery)} {
				if n := len(scanPrefix(t, e.db, p)); n != 0 {
					t.Fatalf("%d keys left under %s", n, p)
				}
			}
			if b.Active().Len() != 0 {
				t.Fatalf("active set %d", b.Active().Len())
			}
		})
	}
}
