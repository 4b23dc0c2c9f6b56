package receipt_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// leaveStarted executes r on svc (SeparateDecide) with the decision write
// failing, so that its receipt stays started under svc's lease with a
// recovery entry.
func leaveStarted(t *testing.T, svc *receipt.Service, r receipt.Request) {
	t.Helper()
	disarm := testsupport.Arm(t, fault.ReceiptDecideBefore, `1*return("crash")`)
	_, err := svc.Execute(ctx, r)
	disarm()
	if !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("Execute %s with a failing decision: %v, want the injected error", r.Key, err)
	}
}

// TestMaintenance_CountsOnlyItsOwnAdoptions: a pass reports the receipts
// it adopted itself, not those a foreground request adopted while the
// pass was running.
func TestMaintenance_CountsOnlyItsOwnAdoptions(t *testing.T) {
	e := newEnv(t)
	n0 := e.open(receipt.WithTestKnobs(receipt.Options{Node: "node-0"}, testknobs.Receipt{SeparateDecide: true}))
	createTable(t, n0, "t")
	ry := req("alice", "t", "ky", incBatch(t, "ky", "ctr-y"))
	leaveStarted(t, n0, ry) // node-0 is alive: its receipt is not adoptable
	old := e.open(receipt.WithTestKnobs(receipt.Options{Node: "node-1"}, testknobs.Receipt{SeparateDecide: true}))
	rx := req("alice", "t", "kx", incBatch(t, "kx", "ctr-x"))
	leaveStarted(t, old, rx)
	old.Close()

	// The new incarnation of node-1 may adopt kx at once. While its pass
	// reads ky's lease (recov/v1/node-0/… comes first), a retry of kx
	// adopts and finishes it in the foreground.
	hs := &hookStore{Store: e.db}
	n1 := e.openOn(hs, receipt.Options{Node: "node-1"})
	ms, fg := passWithForegroundAt(t, n1, hs, rx, lease.ClaimKey(receipt.Bind("alice", "t", "ky")))
	wantCommitted(t, fg, receipt.Bind("alice", "t", "kx"), false)
	if ms.Adopted != 0 || n1.Stats().Adopted != 1 {
		t.Fatalf("pass adopted %d, service %d: want 0 and 1 (the foreground's)", ms.Adopted, n1.Stats().Adopted)
	}
}

// records keeps the log records of one message.
type records struct {
	msg string
	mu  sync.Mutex
	got []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message == r.msg {
		r.mu.Lock()
		r.got = append(r.got, rec)
		r.mu.Unlock()
	}
	return nil
}

func (r *records) attrs() []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]string
	for _, rec := range r.got {
		m := map[string]string{}
		rec.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
		out = append(out, m)
	}
	return out
}

// TestMaintenance_LogsWhatItPassesOverSampled: a receipt that every pass
// fails to read is counted by every pass and logged once per cause per
// MaintainLogEvery, with the count since the last line.
func TestMaintenance_LogsWhatItPassesOverSampled(t *testing.T) {
	e := newEnv(t)
	hs := &hookStore{Store: e.db}
	logs := &records{msg: "receipt: maintenance passed over receipts it could not advance"}
	a := e.openOn(hs, receipt.WithTestKnobs(receipt.Options{Node: "node-0", Logger: slog.New(logs)}, testknobs.Receipt{SeparateDecide: true}))
	createTable(t, a, "t")
	r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
	leaveStarted(t, a, r)
	key := store.NSReceipt.Key(receipt.Bind("alice", "t", "k1"))
	hs.onGet(func(k []byte) error {
		if bytes.Equal(k, key) {
			return errTransient
		}
		return nil
	})
	pass := func(wantLines int) {
		t.Helper()
		ms, err := a.MaintainOnce(ctx)
		if err != nil || ms.ErrorsSeen != 1 || ms.Terminal != 0 {
			t.Fatalf("pass: %+v %v, want the unreadable receipt counted", ms, err)
		}
		if got := len(logs.attrs()); got != wantLines {
			t.Fatalf("%d lines logged, want %d: %v", got, wantLines, logs.attrs())
		}
	}
	pass(1)
	pass(1)
	pass(1)
	e.clock.Advance(receipt.MaintainLogEvery)
	pass(2)
	lines := logs.attrs()
	for i, want := range []string{"1", "3"} {
		if l := lines[i]; l["cause"] != "load/failed" || l["count"] != want || l["err"] != errTransient.Error() {
			t.Errorf("line %d: %v, want cause load/failed, count %s", i, l, want)
		}
	}
	hs.clear()
	if ms, err := a.MaintainOnce(ctx); err != nil || ms.Terminal != 1 {
		t.Fatalf("once readable: %+v %v", ms, err)
	}
}

// TestMaintenance_LookingAtALiveOwnersReceiptHidesNotItsOwner: while a
// pass on node-1 reads the lease of a receipt node-0 holds alive, a
// foreground request for it on node-1 answers "in progress" naming node-0
// (so that a server may forward it there), not as if node-1 itself were
// working on it. Found by idemd's forwarding test on etcd, where a pass
// that ran in that moment made node-b answer unforwarded.
func TestMaintenance_LookingAtALiveOwnersReceiptHidesNotItsOwner(t *testing.T) {
	e := newEnv(t)
	n0 := e.open(receipt.WithTestKnobs(receipt.Options{Node: "node-0"}, testknobs.Receipt{SeparateDecide: true}))
	createTable(t, n0, "t")
	r := req("alice", "t", "k", incBatch(t, "k", "ctr"))
	leaveStarted(t, n0, r)

	hs := &hookStore{Store: e.db}
	n1 := e.openOn(hs, receipt.Options{Node: "node-1"})
	id := receipt.Bind("alice", "t", "k")
	ms, fg := passWithForegroundAt(t, n1, hs, r, store.NSReceipt.Key(id), lease.ClaimKey(id))
	if fg.Code != code.RequestInProgress || fg.Holder.Node != "node-0" {
		t.Fatalf("foreground during the pass: %s held by %+v, want in progress held by node-0", fg.Code, fg.Holder)
	}
	if ms.Deferred != 1 || ms.Adopted != 0 {
		t.Fatalf("pass: %+v, want the live owner's receipt deferred", ms)
	}
}

// passWithForegroundAt runs a maintenance pass of svc (opened on hs) that,
// at its first read of one of keys, runs r in the foreground, and returns
// the pass's stats and the foreground's answer.
func passWithForegroundAt(t *testing.T, svc *receipt.Service, hs *hookStore, r receipt.Request, keys ...[]byte) (receipt.MaintainStats, receipt.Answer) {
	t.Helper()
	var fired atomic.Bool
	var fg receipt.Answer
	var fgErr error
	hs.onGet(func(key []byte) error {
		if slices.ContainsFunc(keys, func(k []byte) bool { return bytes.Equal(k, key) }) && fired.CompareAndSwap(false, true) {
			fg, fgErr = svc.Execute(ctx, r)
		}
		return nil
	})
	ms, err := svc.MaintainOnce(ctx)
	if err != nil || !fired.Load() {
		t.Fatalf("maintenance: %+v %v (foreground ran: %v)", ms, err, fired.Load())
	}
	if fgErr != nil {
		t.Fatal(fgErr)
	}
	return ms, fg
}
