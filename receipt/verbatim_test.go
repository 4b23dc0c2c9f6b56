package receipt_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/receipt"
)

// bodyReq is a keyed request as the API makes it: the batch decoded from
// body, and the body's digest.
func bodyReq(t *testing.T, key, body string) receipt.Request {
	r := req(alice, "t", key, mustBatch(t, body))
	r.BodyDigest = receipt.BodyDigest([]byte(body))
	return r
}

// TestReplayVerbatim_TheSameBytesReplayTheStoredEnvelope: a retry of the
// bytes a receipt was made from replays exactly what Execute replays —
// from RAM, from the value log after a checkpoint, and after a crash —
// counts as a replay, and never runs the batch again.
func TestReplayVerbatim_TheSameBytesReplayTheStoredEnvelope(t *testing.T) {
	e := newEnv(t)
	svc := e.open(receipt.Options{})
	createTable(t, svc, "t")
	body := `{"inserts":[{"id":"doc-a","doc":{"tag":"a"}}],"transforms":[{"id":"ctr","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`
	r := bodyReq(t, "k1", body)
	first := mustExecute(t, svc, r)
	wantCommitted(t, first, receipt.Bind(alice, "t", "k1"), false)
	check := func(svc *receipt.Service, when string) {
		t.Helper()
		before := svc.Stats().Replayed
		got, ok := svc.ReplayVerbatim(ctx, alice, "t", "k1", time.Time{}, r.BodyDigest)
		if !ok {
			t.Fatalf("%s: the same bytes did not replay", when)
		}
		via := mustExecute(t, svc, r)
		if !got.Terminal || !got.Replayed || got.Expiry != via.Expiry || got.Expiry == (receipt.Expiry{}) {
			t.Fatalf("%s: verbatim %+v, Execute %+v", when, got, via)
		}
		wantSameEnvelope(t, got.Envelope, first.Envelope)
		wantSameEnvelope(t, via.Envelope, first.Envelope)
		if n := svc.Stats().Replayed - before; n != 2 {
			t.Fatalf("%s: %d replays counted, want 2", when, n)
		}
		if c := counter(t, svc, "t", "ctr"); c != 1 {
			t.Fatalf("%s: counter %d, want 1", when, c)
		}
	}
	check(svc, "in RAM")
	if err := e.db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if e.db.Stats().ValueLog.Live == 0 {
		t.Fatal("the terminal receipt did not move to the value log")
	}
	check(svc, "from the value log")
	svc.Close()
	e.crash()
	check(e.open(receipt.Options{}), "after a crash")
}

// TestReplayVerbatim_AnythingButTheSameBytesOfATerminalReceiptIsLeftToExecute:
// other bytes — for the same batch or another — another key, table or
// principal, no receipt, one still started, one made without a digest, and
// requests Execute refuses before any lookup get no verbatim answer; Execute
// then decides them as it always did.
func TestReplayVerbatim_AnythingButTheSameBytesOfATerminalReceiptIsLeftToExecute(t *testing.T) {
	e := newEnv(t)
	svc := e.open(receipt.Options{})
	createTable(t, svc, "t")
	body := `{"inserts":[{"id":"doc-a","doc":{"tag":"a"}}]}`
	r := bodyReq(t, "k1", body)
	first := mustExecute(t, svc, r)
	none := func(what, principal, tbl, key string, sent time.Time, digest []byte) {
		t.Helper()
		if ans, ok := svc.ReplayVerbatim(ctx, principal, tbl, key, sent, digest); ok {
			t.Fatalf("%s: a verbatim answer %+v", what, ans)
		}
	}
	reformatted := `{ "inserts": [ {"id": "doc-a", "doc": {"tag": "a"}} ] }`
	none("the same batch in other bytes", alice, "t", "k1", time.Time{}, receipt.BodyDigest([]byte(reformatted)))
	none("another batch", alice, "t", "k1", time.Time{}, receipt.BodyDigest([]byte(`{"inserts":[{"id":"doc-b","doc":{}}]}`)))
	none("another key", alice, "t", "k2", time.Time{}, r.BodyDigest)
	none("another principal", "bob", "t", "k1", time.Time{}, r.BodyDigest)
	none("another table", alice, "u", "k1", time.Time{}, r.BodyDigest)
	none("an invalid key", alice, "t", "", time.Time{}, r.BodyDigest)
	none("an invalid table", alice, "no/such", "k1", time.Time{}, r.BodyDigest)
	none("a first send in the future", alice, "t", "k1", time.Now().Add(time.Hour), r.BodyDigest)
	none("a digest of another length", alice, "t", "k1", time.Time{}, r.BodyDigest[:8])

	// Execute still decides them: the same batch in other bytes replays,
	// another batch is a mismatch.
	wantSameEnvelope(t, mustExecute(t, svc, bodyReq(t, "k1", reformatted)).Envelope, first.Envelope)
	if ans := mustExecute(t, svc, bodyReq(t, "k1", `{"inserts":[{"id":"doc-b","doc":{}}]}`)); ans.Status != 422 {
		t.Fatalf("another batch under k1: %+v, want 422", ans)
	}

	// A receipt made without a digest (a library caller's) never replays
	// verbatim.
	plain := req(alice, "t", "k3", mustBatch(t, body))
	mustExecute(t, svc, plain)
	none("a receipt without a digest", alice, "t", "k3", time.Time{}, receipt.BodyDigest([]byte(body)))

	// A receipt still started (a conflict's abort decided, its terminal
	// write failed) is Execute's to settle.
	blockDoc(t, svc, "t", "X")
	started := bodyReq(t, "k4", `{"inserts":[{"id":"X","doc":{}}]}`)
	disarm := testsupport.Arm(t, fault.ReceiptTerminalBefore, `1*return("eio")`)
	ans, err := svc.Execute(ctx, started)
	disarm()
	if err != nil && !errors.Is(err, fault.ErrInjected) || err == nil && ans.Terminal {
		t.Fatalf("Execute with a failing terminal write: %+v %v", ans, err)
	}
	if rec, _ := record(t, e.db, receipt.Bind(alice, "t", "k4")); rec.State != receipt.Started {
		t.Fatalf("receipt %v, want started", rec.State)
	}
	none("a started receipt", alice, "t", "k4", time.Time{}, started.BodyDigest)
	if ms, err := svc.MaintainOnce(ctx); err != nil || ms.Terminal != 1 {
		t.Fatalf("maintenance: %+v %v", ms, err)
	}
	if _, ok := svc.ReplayVerbatim(ctx, alice, "t", "k4", time.Time{}, started.BodyDigest); !ok {
		t.Fatal("once terminal, the same bytes did not replay")
	}
}
