package receipt

import (
	"math"
	"reflect"
	"testing"
)

// TestRecordTimes_RoundTrip: a schema-3 record's times come back exactly
// through their offsets — absent, in Created's own ms, before it, far
// after it — and times too far from Created to offset are written as
// schema 2, which decodes to the same record but for its schema number.
func TestRecordTimes_RoundTrip(t *testing.T) {
	const c = 1_700_000_000_000
	cases := []struct {
		name                                   string
		created, started, completed, ret, prot int64
		wantSchema                             int
	}{
		{"pending", c, 0, 0, c + 86_400_000, 0, Schema3},
		{"terminal", c, c + 1, c + 2, c + 2 + 86_400_000, c + 2 + 2*86_400_000, Schema3},
		{"same ms", c, c, c, c, c, Schema3},
		{"clock behind", c, c - 1, c - 1000, c - 2, c - 1, Schema3},
		{"no created", 0, 5, 6, 7, 8, Schema3},
		{"far apart", c, c + 1, c + 2, math.MaxInt64, 0, Schema2},
		{"far before", math.MinInt64, 0, 1, 0, 0, Schema2},
	}
	for _, tc := range cases {
		r := Record{Schema: Schema3, Principal: "p", Table: "t", Key: "k", Fingerprint: []byte{1}, State: Terminal,
			Envelope: &StoredEnvelope{Status: 201, Outcome: OutcomeCommitted},
			Created:  tc.created, Started: tc.started, Completed: tc.completed, RetainUntil: tc.ret, ProtectUntil: tc.prot}
		b, err := EncodeRecord(&r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeRecord(b)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got.Schema != tc.wantSchema {
			t.Errorf("%s: written as schema %d, want %d", tc.name, got.Schema, tc.wantSchema)
		}
		got.Schema = r.Schema
		if !reflect.DeepEqual(*got, r) {
			t.Errorf("%s: decoded\n %+v\nwant\n %+v", tc.name, *got, r)
		}
	}
}

// TestRecordTimes_Schema2WritesAsItDid: a record read in schema 2 (an
// older build's) and written again keeps schema 2 and absolute times, byte
// for byte what schema 2's writer made; schema 3 of the same record is 20
// bytes shorter for a terminal receipt's four times.
func TestRecordTimes_Schema2WritesAsItDid(t *testing.T) {
	const c = 1_700_000_000_000
	r := Record{Schema: Schema2, Principal: "p", Table: "t", Key: "k", Fingerprint: make([]byte, 32), State: Terminal,
		Envelope: &StoredEnvelope{Status: 201, Outcome: OutcomeCommitted},
		Created:  c, Started: c + 1, Completed: c + 2, RetainUntil: c + 2 + 86_400_000}
	old, err := encMode.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	b, err := EncodeRecord(&r)
	if err != nil || string(b) != string(old) {
		t.Fatalf("schema 2 rewritten as %x (%v), want %x", b, err, old)
	}
	r.Schema = Schema3
	b3, err := EncodeRecord(&r)
	if err != nil {
		t.Fatal(err)
	}
	if len(old)-len(b3) != 20 {
		t.Errorf("schema 3 is %d bytes, schema 2 %d: want 20 fewer", len(b3), len(old))
	}
}
