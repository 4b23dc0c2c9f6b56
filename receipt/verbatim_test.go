package receipt_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
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
	hs := &hookStore{Store: e.db}
	svc := e.openOn(hs, receipt.Options{})
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

	// A receipt still started (a participant's no decided, its terminal
	// write failed) is Execute's to settle.
	voteNo(hs, alice, "t")
	started := bodyReq(t, "k4", `{"inserts":[{"id":"X","doc":{}}]}`)
	disarm := testsupport.Arm(t, fault.ReceiptTerminalBefore, `1*return("eio")`)
	ans, err := svc.Execute(ctx, started)
	disarm()
	hs.clear()
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

// getCounter counts the store reads of one transaction's receipt and
// tombstone (whose key holds the ID in binary).
type getCounter struct {
	*engine.DB
	id   string
	mu   sync.Mutex
	gets int
}

func (g *getCounter) Get(ctx context.Context, key []byte) (store.Item, error) {
	raw, _ := hex.DecodeString(g.id)
	if strings.Contains(string(key), g.id) || bytes.HasSuffix(key, raw) {
		g.mu.Lock()
		g.gets++
		g.mu.Unlock()
	}
	return g.DB.Get(ctx, key)
}

func (g *getCounter) take() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.gets
	g.gets = 0
	return n
}

// TestReplayVerbatimOrSeen_ANewKeyIsReadOnce: what the verbatim lookup read
// of a new key — no receipt, no tombstone — is where Execute starts, so the
// API's path reads the key's two records once, not twice; and the request
// executes as it would have.
func TestReplayVerbatimOrSeen_ANewKeyIsReadOnce(t *testing.T) {
	e := newEnv(t)
	r := bodyReq(t, "k1", `{"inserts":[{"id":"doc-a","doc":{"tag":"a"}}],"transforms":[{"id":"ctr","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`)
	st := &getCounter{DB: e.db, id: receipt.Bind(alice, "t", "k1")}
	svc := e.openOn(st, receipt.Options{})
	createTable(t, svc, "t")
	st.take()

	_, ok, seen := svc.ReplayVerbatimOrSeen(ctx, alice, "t", "k1", time.Time{}, r.BodyDigest)
	if ok {
		t.Fatal("a new key replayed")
	}
	if n := st.take(); n != 2 {
		t.Fatalf("the verbatim lookup of a new key read %d of its records, want 2 (receipt, tombstone)", n)
	}
	r.Seen = seen
	wantCommitted(t, mustExecute(t, svc, r), receipt.Bind(alice, "t", "k1"), false)
	if n := st.take(); n != 0 {
		t.Fatalf("Execute read the key's records %d times after the verbatim lookup, want 0", n)
	}

	// Without what was seen, Execute reads them itself.
	r2 := bodyReq(t, "k2", `{"inserts":[{"id":"doc-b","doc":{}}]}`)
	st.id = receipt.Bind(alice, "t", "k2")
	mustExecute(t, svc, r2)
	if n := st.take(); n != 2 {
		t.Fatalf("Execute alone read a new key's records %d times, want 2", n)
	}
}

// TestReplayVerbatimOrSeen_WhatWasSeenBeforeAnotherRequestIsReadAgain: the
// same request arriving twice, the second starting from a lookup made
// before the first created the receipt, executes once: its create finds
// the receipt there and it replays the first's answer. What was seen of
// one key never stands for another's.
func TestReplayVerbatimOrSeen_WhatWasSeenBeforeAnotherRequestIsReadAgain(t *testing.T) {
	e := newEnv(t)
	svc := e.open(receipt.Options{})
	createTable(t, svc, "t")
	body := `{"inserts":[{"id":"doc-a","doc":{"tag":"a"}}],"transforms":[{"id":"ctr","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`
	stale := bodyReq(t, "k1", body)
	_, _, stale.Seen = svc.ReplayVerbatimOrSeen(ctx, alice, "t", "k1", time.Time{}, stale.BodyDigest)

	first := mustExecute(t, svc, bodyReq(t, "k1", body))
	wantCommitted(t, first, receipt.Bind(alice, "t", "k1"), false)
	second := mustExecute(t, svc, stale)
	if !second.Terminal || !second.Replayed {
		t.Fatalf("the request that saw no receipt before the first made it: %+v, want the first's answer replayed", second)
	}
	wantSameEnvelope(t, second.Envelope, first.Envelope)
	if c := counter(t, svc, "t", "ctr"); c != 1 {
		t.Fatalf("counter %d, want 1: the batch ran twice", c)
	}

	// What was seen of k1 (a terminal receipt now) handed to a request for
	// k2: k2 is read afresh and executes.
	_, _, seenK1 := svc.ReplayVerbatimOrSeen(ctx, alice, "t", "k1", time.Time{}, receipt.BodyDigest([]byte("other bytes")))
	other := bodyReq(t, "k2", `{"inserts":[{"id":"doc-b","doc":{"tag":"b"}}],"transforms":[{"id":"ctr","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`)
	other.Seen = seenK1
	wantCommitted(t, mustExecute(t, svc, other), receipt.Bind(alice, "t", "k2"), false)
	if c := counter(t, svc, "t", "ctr"); c != 2 {
		t.Fatalf("counter %d, want 2", c)
	}
}
