package twopc

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/store"
)

// wantDamaged checks that err is corruption naming key.
func wantDamaged(t *testing.T, name string, err error, key []byte) {
	t.Helper()
	if k, ok := store.DamagedKey(err); !errors.Is(err, store.ErrCorruption) || !ok || !bytes.Equal(k, key) ||
		!strings.Contains(err.Error(), fmt.Sprintf("%q", key)) {
		t.Errorf("%s: decode: %v, want store.ErrCorruption naming %q", name, err, key)
	}
}

// TestDecision_InvariantsArePaired: a decision that breaks an invariant is
// refused at encode (store.ErrInvariant, nothing encoded) and, forced past
// encode, at decode (store.ErrCorruption naming its key); well-formed ones
// round-trip.
func TestDecision_InvariantsArePaired(t *testing.T) {
	key := decisionKey("t1")
	for _, o := range []Outcome{Committed{Result: []byte(`{}`)}, Aborted{Code: code.TransactionAborted, Message: "m"}} {
		b, err := encodeDecision(o, 5)
		if err != nil {
			t.Fatalf("%T: %v", o, err)
		}
		d, err := decodeDecision(key, b)
		if err != nil || !reflect.DeepEqual(d.outcome(), o) || d.Decided != 5 {
			t.Fatalf("%T: round trip %+v %v", o, d, err)
		}
	}
	if b, err := encodeDecision(Aborted{}, 5); !errors.Is(err, store.ErrInvariant) || b != nil {
		t.Errorf("an abort without a code: encode gave %d bytes, %v; want nothing and store.ErrInvariant", len(b), err)
	}
	if b, err := encodeDecision(nil, 5); !errors.Is(err, store.ErrInvariant) || b != nil {
		t.Errorf("no outcome: encode gave %d bytes, %v; want nothing and store.ErrInvariant", len(b), err)
	}
	for name, d := range map[string]decision{
		"no schema":               {Commit: true, Decided: 5},
		"an abort without a code": {Schema: schemaV1, Decided: 5},
		"a commit with a code":    {Schema: schemaV1, Commit: true, Code: "transaction_aborted", Decided: 5},
	} {
		if err := d.check(); err == nil {
			t.Errorf("%s: check passed", name)
		}
		raw, err := cbor.Marshal(d) // forced past encodeDecision's check
		if err != nil {
			t.Fatal(err)
		}
		_, err = decodeDecision(key, raw)
		wantDamaged(t, name, err, key)
	}
	_, err := decodeDecision(key, []byte{0xff})
	wantDamaged(t, "bytes that do not decode", err, key)
}

// TestCoordinatorRecord_InvariantsArePaired is TestDecision_InvariantsArePaired
// for the coordinator record.
func TestCoordinatorRecord_InvariantsArePaired(t *testing.T) {
	key := recordKey("t1")
	for _, r := range []record{
		{Schema: schemaV1, Created: 5, Participants: []partRecord{{ID: "p1", Ref: []byte("r")}, {ID: "p2", Resolved: true}}},
		{Schema: schemaV1, Created: 5, Unprepared: true},
	} {
		b, err := encodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeRecord(key, b)
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip %+v %v", got, err)
		}
	}
	for name, r := range map[string]record{
		"no schema":                    {Created: 5, Participants: []partRecord{{ID: "p1"}}},
		"a participant without an ID":  {Schema: schemaV1, Participants: []partRecord{{ID: "p1"}, {Ref: []byte("r")}}},
		"unprepared with participants": {Schema: schemaV1, Unprepared: true, Participants: []partRecord{{ID: "p1"}}},
	} {
		if b, err := encodeRecord(r); !errors.Is(err, store.ErrInvariant) || b != nil {
			t.Errorf("%s: encode gave %d bytes, %v; want nothing and store.ErrInvariant", name, len(b), err)
		}
		raw, err := cbor.Marshal(r) // forced past encodeRecord's check
		if err != nil {
			t.Fatal(err)
		}
		_, err = decodeRecord(key, raw)
		wantDamaged(t, name, err, key)
	}
}
