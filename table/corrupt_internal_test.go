package table

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
)

// TestRecords_ThatDoNotDecodeAreCorruptionNamingTheirKey: bytes that no
// version of Idem wrote at a table's metadata key or at a document's
// intent key are the store's damage — errors.Is(err, store.ErrCorruption),
// with the key named (store.DamagedKey) — never a plain decoding error
// that a caller might take for its own failure.
func TestRecords_ThatDoNotDecodeAreCorruptionNamingTheirKey(t *testing.T) {
	ctx := context.Background()
	garbage := []byte{0xff, 0x00, 0x13}
	for _, c := range []struct {
		what string
		key  func(m Meta) []byte
	}{
		{"a document's intent", func(m Meta) []byte { return intentKey(m.ID, ShardOf("d", m.Shards), "d") }},
		{"the table's metadata", func(m Meta) []byte { return metaKey("alice", "t") }},
	} {
		st := memstore.New()
		tables := New(st, time.Now)
		m, _, err := tables.Create(ctx, "alice", "t", 0)
		if err != nil {
			t.Fatal(err)
		}
		key := c.key(m)
		if _, err := st.Apply(ctx, new(store.Batch).Put(key, garbage)); err != nil {
			t.Fatal(err)
		}
		tables = New(st, time.Now) // no cached metadata
		_, err = tables.Get(ctx, "alice", "t", "d")
		if !errors.Is(err, store.ErrCorruption) {
			t.Fatalf("%s: Get: %v, want ErrCorruption", c.what, err)
		}
		if k, ok := store.DamagedKey(err); !ok || !bytes.Equal(k, key) {
			t.Fatalf("%s: Get: %v names key %q (%v), want %q", c.what, err, k, ok, key)
		}
	}
}
