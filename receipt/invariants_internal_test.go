package receipt

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
)

const msT0 = 1_700_000_000_000

// wellFormed is a record in state st that keeps every invariant (check).
func wellFormed(st State) *Record {
	r := &Record{Schema: SchemaCurrent, Principal: "alice", Table: "t", Key: "k", Fingerprint: bytes.Repeat([]byte{7}, 32),
		State: st, Created: msT0, RetainUntil: msT0 + 1000}
	switch st {
	case Pending:
		r.Request, r.Owner = []byte(`{"table":"t","batch":{}}`), &lease.Claim{Node: "n", Incarnation: 1, Epoch: 1}
	case Started:
		r.Started, r.Owner = msT0+1, &lease.Claim{Node: "n", Incarnation: 1, Epoch: 1}
	case Terminal:
		r.Started, r.Completed, r.ProtectUntil = msT0+1, msT0+2, msT0+5000
		r.Envelope = &StoredEnvelope{Status: 201, Outcome: OutcomeCommitted, RetryWith: "none", Result: []byte(`{}`)}
	}
	return r
}

// wantPaired checks one broken record both ways: encode refuses it as an
// invariant violation, writing nothing; the same bytes forced past encode
// (raw) are refused on read-back as corruption naming key.
func wantPaired(t *testing.T, name string, enc func() ([]byte, error), raw []byte, key []byte, decodeAt func() error) {
	t.Helper()
	if b, err := enc(); !errors.Is(err, store.ErrInvariant) || errors.Is(err, store.ErrCorruption) || b != nil {
		t.Errorf("%s: encode gave %d bytes, %v; want nothing and store.ErrInvariant", name, len(b), err)
	}
	if len(raw) == 0 {
		t.Fatalf("%s: nothing forced past encode", name)
	}
	err := decodeAt()
	if !errors.Is(err, store.ErrCorruption) || errors.Is(err, store.ErrInvariant) {
		t.Errorf("%s: decode of the forced bytes: %v; want store.ErrCorruption", name, err)
	}
	if k, ok := store.DamagedKey(err); !ok || !bytes.Equal(k, key) || !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) {
		t.Errorf("%s: decode error %v names key %q (%v), want %q", name, err, k, ok, key)
	}
}

// TestRecord_InvariantsArePaired: each invariant a receipt record keeps is
// asserted at encode (store.ErrInvariant, nothing encoded) and at decode
// (store.ErrCorruption naming the key); well-formed records round-trip.
func TestRecord_InvariantsArePaired(t *testing.T) {
	key := receiptKey("0123456789abcdef0123456789abcdef")
	for _, st := range []State{Pending, Started, Terminal} {
		want := wellFormed(st)
		enc, err := EncodeRecord(want)
		if err != nil {
			t.Fatalf("%s: %v", st, err)
		}
		got, err := recordAt(key, enc)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: round trip %+v %v", st, got, err)
		}
	}
	legacy := wellFormed(Terminal)
	legacy.Schema, legacy.Envelope, legacy.Outcome = Schema1, nil, OutcomeCommitted
	if _, err := EncodeRecord(legacy); err != nil {
		t.Fatalf("schema-1 terminal: %v", err)
	}
	for _, tc := range []struct {
		name   string
		st     State
		break_ func(r *Record)
	}{
		{"no schema", Pending, func(r *Record) { r.Schema = 0 }},
		{"state zero", Pending, func(r *Record) { r.State = 0 }},
		{"state expired (never stored)", Terminal, func(r *Record) { r.State = Expired }},
		{"no fingerprint", Started, func(r *Record) { r.Fingerprint = nil }},
		{"protected before its retention ends", Terminal, func(r *Record) { r.ProtectUntil = r.RetainUntil - 1 }},
		{"pending with an envelope", Pending, func(r *Record) { r.Envelope = wellFormed(Terminal).Envelope }},
		{"started with an envelope", Started, func(r *Record) { r.Envelope = wellFormed(Terminal).Envelope }},
		{"pending without its request", Pending, func(r *Record) { r.Request = nil }},
		{"pending without an owner", Pending, func(r *Record) { r.Owner = nil }},
		{"started without an owner", Started, func(r *Record) { r.Owner = nil }},
		{"started without a start time", Started, func(r *Record) { r.Started = 0 }},
		{"terminal with its request", Terminal, func(r *Record) { r.Request = []byte("{}") }},
		{"terminal without an envelope", Terminal, func(r *Record) { r.Envelope = nil }},
		{"schema-1 terminal without an outcome", Terminal, func(r *Record) { r.Schema, r.Envelope = Schema1, nil }},
		{"envelope outcome pending", Terminal, func(r *Record) { r.Envelope.Outcome = OutcomePending }},
		{"envelope without a status", Terminal, func(r *Record) { r.Envelope.Status = 0 }},
	} {
		r := wellFormed(tc.st)
		tc.break_(r)
		raw, err := encMode.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		wantPaired(t, tc.name, func() ([]byte, error) { return EncodeRecord(r) }, raw, key,
			func() error { _, err := recordAt(key, raw); return err })
		if _, err := DecodeRecord(raw); !errors.Is(err, store.ErrCorruption) {
			t.Errorf("%s: DecodeRecord: %v, want store.ErrCorruption", tc.name, err)
		}
	}
}

func wellFormedSession(st SessionState) *SessionRecord {
	r := &SessionRecord{Schema: sessionSchemaCurrent, Principal: "alice", State: st, Created: msT0, Expires: msT0 + 30_000}
	switch st {
	case SessionOpen:
		r.Owner, r.Staging = &lease.Claim{Node: "n", Incarnation: 1, Epoch: 1}, &table.Staging{}
	case SessionCommitted:
		r.Key, r.TxnID, r.Ended, r.RetainUntil = "k", "0123456789abcdef0123456789abcdef", msT0+1, msT0+1000
	case SessionAborted:
		r.Reason, r.Ended, r.RetainUntil = ReasonExpired, msT0+1, msT0+1000
	}
	return r
}

// TestSessionRecord_InvariantsArePaired is TestRecord_InvariantsArePaired
// for session records.
func TestSessionRecord_InvariantsArePaired(t *testing.T) {
	key := sessionKey("s_0123456789abcdef0123456789abcdef")
	for _, st := range []SessionState{SessionOpen, SessionCommitted, SessionAborted} {
		want := wellFormedSession(st)
		enc, err := encodeSession(want)
		if err != nil {
			t.Fatalf("%s: %v", st, err)
		}
		got, err := sessionAt(key, enc)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: round trip %+v %v", st, got, err)
		}
	}
	for _, tc := range []struct {
		name   string
		st     SessionState
		break_ func(r *SessionRecord)
	}{
		{"no schema", SessionOpen, func(r *SessionRecord) { r.Schema = 0 }},
		{"unknown state", SessionOpen, func(r *SessionRecord) { r.State = 4 }},
		{"open without an owner", SessionOpen, func(r *SessionRecord) { r.Owner = nil }},
		{"ended with an owner", SessionAborted, func(r *SessionRecord) { r.Owner = &lease.Claim{Node: "n", Epoch: 1} }},
		{"ended with its staging", SessionCommitted, func(r *SessionRecord) { r.Staging = &table.Staging{} }},
		{"ended without a retention deadline", SessionAborted, func(r *SessionRecord) { r.RetainUntil = 0 }},
		{"committed without its transaction", SessionCommitted, func(r *SessionRecord) { r.TxnID = "" }},
		{"aborted without a reason", SessionAborted, func(r *SessionRecord) { r.Reason = "" }},
	} {
		r := wellFormedSession(tc.st)
		tc.break_(r)
		raw, err := encMode.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		wantPaired(t, tc.name, func() ([]byte, error) { return encodeSession(r) }, raw, key,
			func() error { _, err := sessionAt(key, raw); return err })
		if _, err := DecodeSession(raw); !errors.Is(err, store.ErrCorruption) {
			t.Errorf("%s: DecodeSession: %v, want store.ErrCorruption", tc.name, err)
		}
	}
}

// TestTombstone_InvariantsArePaired: a tombstone encode refuses writes
// nothing; the broken outcome forced past encode is refused on read-back
// as corruption naming the key. The other refusals are of what the
// encoding cannot hold at all (an ID that has no key; a time it would
// clamp), so there are no such bytes to read back.
func TestTombstone_InvariantsArePaired(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef"
	done := time.UnixMilli(msT0)
	good := func() *Tombstone {
		return &Tombstone{TxnID: id, Outcome: OutcomeAborted, Fingerprint: [8]byte{1, 2, 3},
			Completed: done, ProtectUntil: done.Add(time.Hour)}
	}
	enc, err := encodeTomb(good())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeTomb(id, enc); err != nil || !reflect.DeepEqual(got, good()) {
		t.Fatalf("round trip %+v %v", got, err)
	}
	bad := good()
	bad.Outcome = OutcomePending
	raw := appendTomb(nil, bad)
	wantPaired(t, "outcome a tombstone does not keep", func() ([]byte, error) { return encodeTomb(bad) }, raw, tombKey(id),
		func() error { _, err := decodeTomb(id, raw); return err })
	if _, err := decodeTomb(id, raw); !errors.Is(err, ErrTombstoneCorrupt) {
		t.Errorf("decode: %v, want ErrTombstoneCorrupt", err)
	}
	for name, breakIt := range map[string]func(*Tombstone){
		"an ID that is not 32 hex digits":  func(t *Tombstone) { t.TxnID = "k" },
		"completed before 1970":            func(t *Tombstone) { t.Completed = time.UnixMilli(-1) },
		"protected until before completed": func(t *Tombstone) { t.ProtectUntil = t.Completed.Add(-time.Millisecond) },
	} {
		tb := good()
		breakIt(tb)
		if b, err := encodeTomb(tb); !errors.Is(err, store.ErrInvariant) || b != nil {
			t.Errorf("%s: encode gave %d bytes, %v; want nothing and store.ErrInvariant", name, len(b), err)
		}
	}
}
