package receipt

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
)

// terminalOf is a terminal record of a keyed batch as execute stores it,
// with env as its envelope.
func terminalOf(schema int, env *StoredEnvelope) *Record {
	const c = 1_700_000_000_000
	return &Record{Schema: schema, Principal: "bench", Table: "bench", Key: "k-0-12345", Fingerprint: make([]byte, 32),
		State: Terminal, Created: c, Started: c, Completed: c + 1, RetainUntil: c + 1 + 86_400_000,
		ProtectUntil: c + 1 + 2*86_400_000, Entries: make([]byte, 63), Envelope: env}
}

func committedWith(result string) *StoredEnvelope {
	return &StoredEnvelope{Status: 201, Outcome: OutcomeCommitted, RetryWith: "none", Result: []byte(result)}
}

// wireFields are the top-level fields of an encoded record.
func wireFields(t *testing.T, b []byte) map[int]cbor.RawMessage {
	t.Helper()
	var m map[int]cbor.RawMessage
	if err := cbor.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// roundTrip encodes r, checks it decodes to exactly r, and returns the
// bytes.
func roundTrip(t *testing.T, r *Record) []byte {
	t.Helper()
	b, err := EncodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Fatalf("decoded\n %+v %+v\nwant\n %+v %+v", back, back.Envelope, r, r.Envelope)
	}
	return b
}

// TestRecordEnvelope_CommittedAsCounts: a committed batch's envelope, its
// result as resultJSON writes it, goes out as three counts and comes back
// exactly: 63 bytes fewer for a 10-document batch than in schema 3.
func TestRecordEnvelope_CommittedAsCounts(t *testing.T) {
	for _, counts := range []resultCounts{{10, 0, 0}, {0, 0, 0}, {1, 2, 3}, {math.MaxInt64, math.MinInt64, -1}} {
		env := committedEnvelope(counts)
		b4 := roundTrip(t, terminalOf(Schema4, env))
		f := wireFields(t, b4)
		if _, whole := f[14]; whole || f[22] == nil {
			t.Fatalf("%v: schema 4 stored the envelope whole (fields %v)", counts, f)
		}
		if counts == (resultCounts{10, 0, 0}) {
			b3 := roundTrip(t, terminalOf(Schema3, env))
			if len(b3)-len(b4) != 63 {
				t.Errorf("schema 4 is %d bytes, schema 3 %d: want 63 fewer", len(b4), len(b3))
			}
		}
	}
	if got := string(committedEnvelope(resultCounts{10, 0, 0}).Result); got != string(resultJSON(table.Result{Inserted: 10})) {
		t.Fatalf("rebuilt result %s is not what execute stores", got)
	}
}

// TestRecordEnvelope_OthersWhole: an envelope the counts would not rebuild
// byte for byte is stored whole, as schema 3 stores it, and comes back
// exactly.
func TestRecordEnvelope_OthersWhole(t *testing.T) {
	canon := `{"inserted":1,"deleted":0,"transformed":0}`
	others := map[string]*StoredEnvelope{
		"leading zero":    committedWith(`{"inserted":01,"deleted":0,"transformed":0}`),
		"minus zero":      committedWith(`{"inserted":-0,"deleted":0,"transformed":0}`),
		"plus":            committedWith(`{"inserted":+1,"deleted":0,"transformed":0}`),
		"overflow":        committedWith(`{"inserted":9223372036854775808,"deleted":0,"transformed":0}`),
		"space":           committedWith(`{"inserted": 1,"deleted":0,"transformed":0}`),
		"another field":   committedWith(`{"inserted":1,"deleted":0,"transformed":0,"note":"x"}`),
		"trailing":        committedWith(canon + " "),
		"order":           committedWith(`{"deleted":0,"inserted":1,"transformed":0}`),
		"short":           committedWith(`{"inserted":1,"deleted":0}`),
		"no digits":       committedWith(`{"inserted":,"deleted":0,"transformed":0}`),
		"legacy":          committedWith(`{}`),
		"empty":           committedWith(``),
		"status":          {Status: 200, Outcome: OutcomeCommitted, RetryWith: "none", Result: []byte(canon)},
		"retry_with":      {Status: 201, Outcome: OutcomeCommitted, Result: []byte(canon)},
		"message":         {Status: 201, Outcome: OutcomeCommitted, RetryWith: "none", Message: "m", Result: []byte(canon)},
		"code":            {Status: 201, Outcome: OutcomeCommitted, RetryWith: "none", Code: "c", Result: []byte(canon)},
		"retryable":       {Status: 201, Outcome: OutcomeCommitted, RetryWith: "none", Retryable: true, Result: []byte(canon)},
		"retry":           {Status: 201, Outcome: OutcomeCommitted, RetryWith: "none", Retry: RetryNewSession, Result: []byte(canon)},
		"not applied":     {Status: 404, Outcome: OutcomeNotApplied, Code: "table_not_found", Message: "m", RetryWith: "new_key"},
		"aborted session": {Status: 409, Outcome: OutcomeAborted, Code: "transaction_conflict", RetryWith: "none", Retry: RetryNewSession},
	}
	for name, env := range others {
		t.Run(name, func(t *testing.T) {
			if env.Result != nil && len(env.Result) == 0 {
				env.Result = nil // omitempty: an empty result reads back absent in every schema
			}
			b4 := roundTrip(t, terminalOf(Schema4, env))
			b3 := roundTrip(t, terminalOf(Schema3, env))
			if f := wireFields(t, b4); f[22] != nil || len(b4) != len(b3) {
				t.Fatalf("schema 4 (%d bytes, counts %x) is not schema 3 (%d bytes)", len(b4), f[22], len(b3))
			}
		})
	}
}

// TestRecordEnvelope_FarTimesWriteSchema2Whole: a schema-4 record whose
// times do not fit as offsets goes out as schema 2, envelope and all.
func TestRecordEnvelope_FarTimesWriteSchema2Whole(t *testing.T) {
	r := terminalOf(Schema4, committedEnvelope(resultCounts{1, 0, 0}))
	r.ProtectUntil = math.MaxInt64
	b, err := EncodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	f := wireFields(t, b)
	if string(f[1]) != "\x02" || f[14] == nil || f[22] != nil {
		t.Fatalf("fields %x", f)
	}
	back, err := DecodeRecord(b)
	if err != nil || !reflect.DeepEqual(back.Envelope, r.Envelope) {
		t.Fatalf("decoded %+v %v", back, err)
	}
}

// TestRecordEnvelope_BadCountsAreCorruption: counts no writer makes do
// not decode; in a record of an older schema, three counts mean nothing
// and the record is read as its schema says.
func TestRecordEnvelope_BadCountsAreCorruption(t *testing.T) {
	env := map[int]any{1: 201, 2: "committed", 6: "none", 7: []byte(`{}`)}
	base := func(schema int) map[int]any {
		return map[int]any{1: schema, 2: "p", 3: "t", 4: "k", 5: make([]byte, 32), 7: 3, 9: 1}
	}
	bad := map[string]map[int]any{"two counts": base(4), "four counts": base(4), "and an envelope": base(4)}
	bad["two counts"][22] = []int64{1, 0}
	bad["four counts"][22] = []int64{1, 0, 0, 0}
	bad["and an envelope"][22], bad["and an envelope"][14] = []int64{1, 0, 0}, env
	for name, m := range bad {
		raw, _ := cbor.Marshal(m)
		if _, err := DecodeRecord(raw); !errors.Is(err, store.ErrCorruption) {
			t.Errorf("%s: %v, want corruption", name, err)
		}
	}
	old := base(3)
	old[22], old[14] = []int64{1, 2, 3}, env
	raw, _ := cbor.Marshal(old)
	r, err := DecodeRecord(raw)
	if err != nil || string(r.Envelope.Result) != `{}` {
		t.Fatalf("schema 3 with field 22: %+v %v", r, err)
	}
}

// FuzzRecordEnvelope: whatever the envelope, a schema-4 record decodes to
// exactly what was encoded.
func FuzzRecordEnvelope(f *testing.F) {
	f.Add(201, "committed", "none", "", `{"inserted":10,"deleted":0,"transformed":0}`)
	f.Add(201, "committed", "none", "", `{"inserted":-3,"deleted":07,"transformed":0}`)
	f.Add(404, "not_applied", "new_key", "table_not_found", "")
	f.Fuzz(func(t *testing.T, status int, outcome, retryWith, code, result string) {
		if !utf8.ValidString(outcome + retryWith + code) {
			t.Skip("CBOR text is UTF-8 in every schema")
		}
		env := &StoredEnvelope{Status: status, Outcome: outcome, RetryWith: retryWith, Code: code, Result: []byte(result)}
		if result == "" {
			env.Result = nil
		}
		r := terminalOf(Schema4, env)
		if _, err := EncodeRecord(r); err != nil {
			t.Skip("an envelope the invariants refuse")
		}
		roundTrip(t, r)
	})
}

// TestRecordEnvelope_EveryOtherFieldKeepsItWhole: an envelope with any
// field set beyond status, outcome, retry_with and result is not stored
// as counts, which would drop it — including a field added to
// StoredEnvelope later, which committedCounts must then learn to refuse.
func TestRecordEnvelope_EveryOtherFieldKeepsItWhole(t *testing.T) {
	rebuilt := map[string]bool{"Status": true, "Outcome": true, "RetryWith": true, "Result": true}
	typ := reflect.TypeFor[StoredEnvelope]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if rebuilt[f.Name] {
			continue
		}
		env := committedEnvelope(resultCounts{1, 0, 0})
		v := reflect.ValueOf(env).Elem().Field(i)
		switch v.Kind() {
		case reflect.String:
			v.SetString("x")
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int, reflect.Int64:
			v.SetInt(1)
		case reflect.Slice:
			v.SetBytes([]byte{1})
		default:
			t.Fatalf("field %s of kind %s: set it here", f.Name, v.Kind())
		}
		if _, ok := committedCounts(env); ok {
			t.Errorf("an envelope with %s set is stored as counts", f.Name)
		}
	}
}
