package table

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/store"
)

// TestMeta_InvariantsArePaired: table metadata that breaks an invariant is
// refused at encode (store.ErrInvariant, nothing encoded) and, forced past
// encode, at decode (store.ErrCorruption naming its key) — a zero shard
// count would otherwise divide a hash by zero; well-formed metadata
// round-trips.
func TestMeta_InvariantsArePaired(t *testing.T) {
	key := metaKey("alice", "t")
	good := Meta{Name: "t", ID: "0123456789abcdef", Shards: 4, Created: 5, Tenant: "alice"}
	b, err := encodeMeta(good)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := decodeMeta(key, b); err != nil || m != good {
		t.Fatalf("round trip %+v %v", m, err)
	}
	for name, breakIt := range map[string]func(*Meta){
		"no name":         func(m *Meta) { m.Name = "" },
		"no ID":           func(m *Meta) { m.ID = "" },
		"no shards":       func(m *Meta) { m.Shards = 0 },
		"too many shards": func(m *Meta) { m.Shards = ShardsMax + 1 },
	} {
		m := good
		breakIt(&m)
		if b, err := encodeMeta(m); !errors.Is(err, store.ErrInvariant) || b != nil {
			t.Errorf("%s: encode gave %d bytes, %v; want nothing and store.ErrInvariant", name, len(b), err)
		}
		raw, err := cbor.Marshal(m) // forced past encodeMeta's check
		if err != nil {
			t.Fatal(err)
		}
		_, err = decodeMeta(key, raw)
		if k, ok := store.DamagedKey(err); !errors.Is(err, store.ErrCorruption) || !ok || !bytes.Equal(k, key) ||
			!strings.Contains(err.Error(), fmt.Sprintf("%q", key)) {
			t.Errorf("%s: decode: %v, want store.ErrCorruption naming %q", name, err, key)
		}
	}
}

// TestParticipant_ARefThatBreaksItsInvariantsIsCorruption: a participant
// ref without its table, or with a shard out of range, does not rebuild.
func TestParticipant_ARefThatBreaksItsInvariantsIsCorruption(t *testing.T) {
	tables := New(nil, nil)
	for name, r := range map[string]shardRef{
		"no table":         {Shard: 1},
		"a negative shard": {TableID: "x", Shard: -1},
		"a shard too high": {TableID: "x", Shard: ShardsMax},
	} {
		raw, err := cbor.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tables.Participant(raw); !errors.Is(err, store.ErrCorruption) {
			t.Errorf("%s: %v, want store.ErrCorruption", name, err)
		}
	}
	if _, err := tables.Participant(mustRef(t, shardRef{TableID: "x", Shard: ShardsMax - 1})); err != nil {
		t.Fatalf("a well-formed ref: %v", err)
	}
}

func mustRef(t *testing.T, r shardRef) []byte {
	t.Helper()
	b, err := cbor.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
