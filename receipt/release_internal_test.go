package receipt

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

// TestRelease_NeverTakesANewerTransactionsDecision is the regression test of
// a bug the fault harness found (seeds 214309875047, 537599306475): a
// decision queued for release when its receipt became terminal was released
// after retention had deleted that receipt and the same key had started a
// new transaction — whose retained decision the release then deleted,
// leaving a started receipt with no 2PC record. A release is now
// conditioned on the receipt version it judged releasable.
func TestRelease_NeverTakesANewerTransactionsDecision(t *testing.T) {
	ctx := context.Background()
	db, clock := internalStore(t)
	vs := &votingNo{Store: db, meta: store.NSMeta.Key("tenant", hex.EncodeToString([]byte("p")), "t")}
	s, err := Open(ctx, vs, Options{Clock: clock, Retention: time.Hour, TombstoneRetention: -1, MaintainInterval: -1, CleanInterval: -1,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Tables().Create(ctx, "p", "t", 0); err != nil {
		t.Fatal(err)
	}
	batch := func(body string) *table.Batch {
		b, err := table.DecodeBatch([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	req := Request{Principal: "p", Table: "t", Key: "k", Batch: batch(`{"inserts":[{"id":"x","doc":{}}]}`)}
	if ans, err := s.Execute(ctx, req); err != nil || ans.Outcome != OutcomeCommitted {
		t.Fatalf("first execution: %+v %v", ans, err)
	}
	id := Bind("p", "t", "k")
	// Retention ends; the cleaner deletes the receipt (and its decision).
	// The release queued by the first execution is still pending.
	clock.Advance(2 * time.Hour)
	if n, err := s.CleanOnce(ctx); err != nil || n != 1 {
		t.Fatalf("clean: %d %v", n, err)
	}
	// The same key, a new request: refused by its participant (a real
	// conflict), its abort decision durable with the started receipt, the
	// terminal write failing — the receipt stays started, held by its
	// decision.
	vs.armed.Store(true)
	disarm := testsupport.Arm(t, fault.ReceiptTerminalBefore, `1*return("eio")`)
	req.Batch = batch(`{"deletes":["x"]}`)
	_, err = s.Execute(ctx, req)
	disarm()
	vs.armed.Store(false)
	if !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("second execution: %v, want the injected terminal failure", err)
	}
	if st, err := s.Coordinator().Lookup(ctx, id); err != nil || st.Decision == nil {
		t.Fatalf("the new transaction is %+v (%v), want decided", st, err)
	}
	if _, err := s.retain.releaseDecisions(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := s.Coordinator().Lookup(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, aborted := st.Decision.(twopc.Aborted); !aborted {
		t.Fatalf("after release the new transaction's decision is %v; a stale release took it", st.Decision)
	}
	// Recovery still publishes the exact refusal.
	if _, err := s.MaintainOnce(ctx); err != nil {
		t.Fatal(err)
	}
	ans, err := s.Execute(ctx, req)
	if err != nil || !ans.Replayed || ans.Code != "table_not_found" {
		t.Fatalf("replay: %+v %v", ans, err)
	}
}

// votingNo makes, while armed, every write conditioned on the table's
// metadata (a Begin's, a chain's) find the table changed: a participant's
// no for a real conflict, which the receipt stores as an abort.
type votingNo struct {
	store.Store
	meta  []byte
	armed atomic.Bool
}

// Capabilities declares none: a chain would apply around Apply.
func (v *votingNo) Capabilities() store.Capabilities { return store.Capabilities{} }

func (v *votingNo) Apply(ctx context.Context, b *store.Batch) (store.Version, error) {
	for _, c := range b.Conds {
		if v.armed.Load() && c.Kind == store.MustBeAtVersion && bytes.Equal(c.Key, v.meta) {
			return 0, &store.ConditionError{Cond: c}
		}
	}
	return v.Store.Apply(ctx, b)
}
