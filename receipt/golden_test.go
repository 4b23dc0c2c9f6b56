package receipt_test

import (
	"bytes"
	"encoding/binary"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// Golden receipt records of every schema ever written (docs/design.md §4). The
// files under testdata/ are frozen: they are decoded and replayed forever.
// `go test ./receipt -run TestGolden -args -update` rewrites them; do that only
// when adding a fixture, never to make a failing decode pass.
var update = flag.Bool("update", false, "rewrite the golden receipt fixtures in testdata/")

// legacyRecordV1 is the schema-1 writer's layout: receipt.Record fields 1..13
// and 15 (the broad outcome), no envelope.
type legacyRecordV1 struct {
	Schema      int          `cbor:"1,keyasint"`
	Principal   string       `cbor:"2,keyasint"`
	Table       string       `cbor:"3,keyasint"`
	Key         string       `cbor:"4,keyasint"`
	Fingerprint []byte       `cbor:"5,keyasint"`
	Request     []byte       `cbor:"6,keyasint,omitempty"`
	State       uint8        `cbor:"7,keyasint"`
	Owner       *lease.Claim `cbor:"8,keyasint,omitempty"`
	Created     int64        `cbor:"9,keyasint"`
	Started     int64        `cbor:"10,keyasint,omitempty"`
	Completed   int64        `cbor:"11,keyasint,omitempty"`
	RetainUntil int64        `cbor:"12,keyasint,omitempty"`
	Debt        uint8        `cbor:"13,keyasint,omitempty"`
	Outcome     string       `cbor:"15,keyasint,omitempty"`
}

// The canonical request every fixture was bound to, and its fingerprint as
// the fixtures store it (so canonicalization can never drift silently).
const (
	goldenTable   = "t"
	goldenBatch   = `{"inserts":[{"id":"golden","doc":{"v":1}}]}`
	goldenRequest = `{"table":"t","batch":{"inserts":[{"id":"golden","doc":{"v":1}}]}}`
	msCreated     = 1_700_000_000_000
)

type golden struct {
	file string
	key  string // Idempotency-Key (principal "alice", table "t")
	want receipt.Record
	// replay is the envelope a retry must get (terminal fixtures).
	replay *receipt.Envelope
}

func goldenFingerprint(t *testing.T) []byte {
	t.Helper()
	canon, fp, err := receipt.Canonical(goldenTable, mustBatch(t, goldenBatch))
	if err != nil {
		t.Fatal(err)
	}
	if string(canon) != goldenRequest {
		t.Fatalf("canonical request changed:\n got %s\nwant %s", canon, goldenRequest)
	}
	return fp[:]
}

func goldens(t *testing.T) []golden {
	fp := goldenFingerprint(t)
	id := func(key string) string { return receipt.Bind("alice", goldenTable, key) }
	base := func(schema int, key string) receipt.Record {
		return receipt.Record{Schema: schema, Principal: "alice", Table: goldenTable, Key: key, Fingerprint: fp,
			Created: msCreated, RetainUntil: msCreated + 86_400_000}
	}
	terminal := func(r receipt.Record) receipt.Record {
		r.State, r.Started, r.Completed = receipt.Terminal, msCreated+1, msCreated+2
		r.RetainUntil = msCreated + 2 + 86_400_000
		return r
	}
	s1c := terminal(base(receipt.Schema1, "legacy-committed"))
	s1c.Outcome = "committed"
	s1a := terminal(base(receipt.Schema1, "legacy-aborted"))
	s1a.Outcome = "aborted"
	s2p := base(receipt.Schema2, "v2-pending")
	s2p.State, s2p.Request = receipt.Pending, []byte(goldenRequest)
	s2p.Owner = &lease.Claim{Node: "node-9", Incarnation: 3, Epoch: 2}
	s2c := terminal(base(receipt.Schema2, "v2-committed"))
	s2c.Envelope = &receipt.StoredEnvelope{Status: 201, Outcome: "committed", RetryWith: "none",
		Result: []byte(`{"inserted":1,"deleted":0,"transformed":0}`)}
	s2n := base(receipt.Schema2, "v2-not-applied")
	s2n.State, s2n.Completed = receipt.Terminal, msCreated+1
	s2n.Envelope = &receipt.StoredEnvelope{Status: 404, Outcome: "not_applied", Code: "table_not_found",
		Message: `table "t" does not exist`, RetryWith: "new_key"}
	// Schema 3: times as offsets from Created — a day's retention, a
	// protection past it, a start in Created's own ms (offset 0) and a
	// completion a clock behind it (a negative offset).
	s3c := terminal(base(receipt.Schema3, "v3-committed"))
	s3c.ProtectUntil = s3c.RetainUntil + 86_400_000
	s3c.Envelope = s2c.Envelope
	s3n := base(receipt.Schema3, "v3-not-applied")
	s3n.State, s3n.Started, s3n.Completed = receipt.Terminal, msCreated, msCreated-5
	s3n.Envelope = s2n.Envelope
	// Schema 4: a committed batch's envelope as its three counts, and
	// envelopes the counts do not rebuild, stored whole.
	s4c := terminal(base(receipt.Schema4, "v4-committed"))
	s4c.ProtectUntil = s4c.RetainUntil + 86_400_000
	s4c.Envelope = &receipt.StoredEnvelope{Status: 201, Outcome: "committed", RetryWith: "none",
		Result: []byte(`{"inserted":1,"deleted":2,"transformed":3}`)}
	s4w := terminal(base(receipt.Schema4, "v4-committed-whole"))
	s4w.Envelope = &receipt.StoredEnvelope{Status: 201, Outcome: "committed", RetryWith: "none", Result: []byte(`{}`)}
	s4n := base(receipt.Schema4, "v4-not-applied")
	s4n.State, s4n.Started, s4n.Completed = receipt.Terminal, msCreated, msCreated-5
	s4n.Envelope = s2n.Envelope
	return []golden{
		{"schema4-committed.cbor", "v4-committed", s4c, &receipt.Envelope{Status: 201, Outcome: "committed",
			RetryWith: "none", TxnID: id("v4-committed"), Result: []byte(`{"inserted":1,"deleted":2,"transformed":3}`)}},
		{"schema4-committed-whole.cbor", "v4-committed-whole", s4w, &receipt.Envelope{Status: 201, Outcome: "committed",
			RetryWith: "none", TxnID: id("v4-committed-whole"), Result: []byte(`{}`)}},
		{"schema4-not-applied.cbor", "v4-not-applied", s4n, &receipt.Envelope{Status: 404, Outcome: "not_applied",
			Code: "table_not_found", Message: `table "t" does not exist`, RetryWith: "new_key", TxnID: id("v4-not-applied")}},
		{"schema3-committed.cbor", "v3-committed", s3c, &receipt.Envelope{Status: 201, Outcome: "committed",
			RetryWith: "none", TxnID: id("v3-committed"), Result: []byte(`{"inserted":1,"deleted":0,"transformed":0}`)}},
		{"schema3-not-applied.cbor", "v3-not-applied", s3n, &receipt.Envelope{Status: 404, Outcome: "not_applied",
			Code: "table_not_found", Message: `table "t" does not exist`, RetryWith: "new_key", TxnID: id("v3-not-applied")}},
		{"schema1-committed.cbor", "legacy-committed", s1c, &receipt.Envelope{Status: 201, Outcome: "committed",
			RetryWith: "none", TxnID: id("legacy-committed"), Result: []byte(`{}`)}},
		{"schema1-aborted.cbor", "legacy-aborted", s1a, &receipt.Envelope{Status: 409, Outcome: "aborted",
			Code: "transaction_aborted", Message: "the transaction was aborted", Retryable: true, RetryWith: "new_key", TxnID: id("legacy-aborted")}},
		{"schema2-pending.cbor", "v2-pending", s2p, nil},
		{"schema2-committed.cbor", "v2-committed", s2c, &receipt.Envelope{Status: 201, Outcome: "committed",
			RetryWith: "none", TxnID: id("v2-committed"), Result: []byte(`{"inserted":1,"deleted":0,"transformed":0}`)}},
		{"schema2-not-applied.cbor", "v2-not-applied", s2n, &receipt.Envelope{Status: 404, Outcome: "not_applied",
			Code: "table_not_found", Message: `table "t" does not exist`, RetryWith: "new_key", TxnID: id("v2-not-applied")}},
	}
}

// encodeGolden is how each schema's writer encoded the record.
func encodeGolden(t *testing.T, g golden) []byte {
	t.Helper()
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		t.Fatal(err)
	}
	if g.want.Schema == receipt.Schema1 {
		r := g.want
		b, err := em.Marshal(legacyRecordV1{Schema: r.Schema, Principal: r.Principal, Table: r.Table, Key: r.Key,
			Fingerprint: r.Fingerprint, Request: r.Request, State: uint8(r.State), Owner: r.Owner, Created: r.Created,
			Started: r.Started, Completed: r.Completed, RetainUntil: r.RetainUntil, Debt: uint8(r.Debt), Outcome: r.Outcome})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b, err := receipt.EncodeRecord(&g.want)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readGolden(t *testing.T, g golden) []byte {
	t.Helper()
	path := filepath.Join("testdata", g.file)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, encodeGolden(t, g), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden fixture %s: %v (run with -update once to create it)", path, err)
	}
	return b
}

// TestGolden_EverySchemaDecodesForever: each frozen fixture decodes to
// exactly the record it was written from, field by field.
func TestGolden_EverySchemaDecodesForever(t *testing.T) {
	for _, g := range goldens(t) {
		t.Run(g.file, func(t *testing.T) {
			raw := readGolden(t, g)
			got, err := receipt.DecodeRecord(raw)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, g.want) {
				t.Fatalf("decoded\n %+v\nwant\n %+v", *got, g.want)
			}
			if g.want.Schema == receipt.Schema1 && (got.Envelope != nil || got.Outcome == "") {
				t.Fatal("schema-1 record with an envelope or without an outcome")
			}
			if got.State == receipt.Terminal && got.Request != nil {
				t.Fatal("terminal record keeps its request")
			}
		})
	}
}

// TestGolden_TerminalFixturesReplayExactly: a stored fixture answers a retry
// of its request with its envelope — schema 1 with the generic fallback
// (committed → 201 {}, aborted → 409 transaction_aborted).
func TestGolden_TerminalFixturesReplayExactly(t *testing.T) {
	e := newEnv(t)
	svc := e.open(receipt.Options{})
	for _, g := range goldens(t) {
		if g.replay == nil {
			continue
		}
		t.Run(g.file, func(t *testing.T) {
			id := receipt.Bind("alice", goldenTable, g.key)
			if _, err := e.db.Apply(ctx, new(store.Batch).Put(store.NSReceipt.Key(id), readGolden(t, g))); err != nil {
				t.Fatal(err)
			}
			ans := mustExecute(t, svc, req("alice", goldenTable, g.key, mustBatch(t, goldenBatch)))
			if !ans.Terminal || !ans.Replayed {
				t.Fatalf("answer %+v, want a replay", ans)
			}
			wantSameEnvelope(t, ans.Envelope, *g.replay)
			if v := view(t, svc, "alice", goldenTable, g.key); v.State != receipt.Terminal || v.Envelope == nil {
				t.Fatalf("lookup %+v", v)
			} else {
				wantSameEnvelope(t, *v.Envelope, *g.replay)
			}
			// A different request under the same key is still a mismatch.
			other := mustExecute(t, svc, req("alice", goldenTable, g.key, mustBatch(t, `{"deletes":["zzz"]}`)))
			wantMismatch(t, other, id, receipt.Terminal, g.replay.Outcome)
		})
	}
}

// TestGolden_PendingFixtureIsExecutedBySuccessorFromStoredRequest: a pending
// schema-2 receipt whose owner's lease expired is adopted and executed by
// maintenance from the canonical request stored in it.
func TestGolden_PendingFixtureIsExecutedBySuccessorFromStoredRequest(t *testing.T) {
	e := newEnv(t)
	svc := e.open(receipt.Options{})
	createTable(t, svc, goldenTable)
	var g golden
	for _, x := range goldens(t) {
		if x.file == "schema2-pending.cbor" {
			g = x
		}
	}
	id := receipt.Bind("alice", goldenTable, g.key)
	claim, _ := cbor.Marshal(*g.want.Owner)
	b := new(store.Batch).
		Put(store.NSReceipt.Key(id), readGolden(t, g)).
		Put(lease.ClaimKey(id), claim).
		Put(lease.ExpiryKey(id), binary.BigEndian.AppendUint64(nil, uint64(t0.Add(-ttl).UnixNano()))).
		Put(store.NSRecovery.Key(g.want.Owner.Node, id), nil)
	if _, err := e.db.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	ms, err := svc.MaintainOnce(ctx)
	if err != nil || ms.Adopted != 1 || ms.Terminal != 1 {
		t.Fatalf("maintenance: %+v %v", ms, err)
	}
	ans := mustExecute(t, svc, req("alice", goldenTable, g.key, mustBatch(t, goldenBatch)))
	if !ans.Replayed || ans.Status != 201 || string(ans.Result) != `{"inserted":1,"deleted":0,"transformed":0}` {
		t.Fatalf("replay %+v (result %s)", ans, ans.Result)
	}
	if !docExists(t, svc, goldenTable, "golden") {
		t.Fatal("the stored request did not execute")
	}
	if items, _ := e.db.Scan(ctx, []byte(store.NSRecovery), store.PrefixEnd([]byte(store.NSRecovery)), 10); len(items) != 0 {
		t.Fatalf("%d recovery entries left", len(items))
	}
}

// TestRecord_DecodingIsAdditive: unknown fields are ignored and missing
// optional fields default to zero; a record without schema or with an
// unknown state is refused.
func TestRecord_DecodingIsAdditive(t *testing.T) {
	fp := goldenFingerprint(t)
	full := map[int]any{1: 2, 2: "alice", 3: "t", 4: "k", 5: fp, 7: 3, 9: int64(msCreated),
		14: map[int]any{1: 201, 2: "committed", 6: "none", 7: []byte(`{}`)},
		99: "a field from the future", 100: map[string]any{"nested": []int{1, 2}}}
	raw, err := cbor.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	r, err := receipt.DecodeRecord(raw)
	if err != nil {
		t.Fatalf("record with unknown fields: %v", err)
	}
	want := receipt.Record{Schema: 2, Principal: "alice", Table: "t", Key: "k", Fingerprint: fp, State: receipt.Terminal,
		Created: msCreated, Envelope: &receipt.StoredEnvelope{Status: 201, Outcome: "committed", RetryWith: "none", Result: []byte(`{}`)}}
	if !reflect.DeepEqual(*r, want) {
		t.Fatalf("decoded %+v, want %+v", *r, want)
	}
	// Unknown fields inside the envelope are ignored too.
	full[14].(map[int]any)[42] = true
	raw, _ = cbor.Marshal(full)
	if _, err := receipt.DecodeRecord(raw); err != nil {
		t.Fatalf("envelope with an unknown field: %v", err)
	}
	for name, bad := range map[string]map[int]any{
		"no schema":     {2: "alice", 7: 3},
		"unknown state": {1: 2, 7: 9},
		"no state":      {1: 2},
	} {
		raw, _ := cbor.Marshal(bad)
		if _, err := receipt.DecodeRecord(raw); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, err := receipt.DecodeRecord([]byte{0xff, 0x00}); err == nil {
		t.Error("garbage decoded")
	}
	// What this version writes round-trips.
	enc, err := receipt.EncodeRecord(&want)
	if err != nil {
		t.Fatal(err)
	}
	back, err := receipt.DecodeRecord(enc)
	if err != nil || !reflect.DeepEqual(*back, want) {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	enc2, _ := receipt.EncodeRecord(back)
	if !bytes.Equal(enc, enc2) {
		t.Fatal("encoding is not deterministic")
	}
}
