package receipt

import (
	"bytes"
	"testing"
)

// keysOf builds in one allocation exactly the keys receiptKey and tombKey
// build apart, for a txn ID and for IDs no receipt has.
func TestKeysOfMatchesTheKeyFunctions(t *testing.T) {
	for _, id := range []string{Bind("alice", "orders", "k1"), "short", "zz" + Bind("a", "b", "c")[2:], ""} {
		k := keysOf(id)
		if !bytes.Equal(k.receipt, receiptKey(id)) {
			t.Errorf("%q: receipt key %q, want %q", id, k.receipt, receiptKey(id))
		}
		if want := tombKey(id); !bytes.Equal(k.tomb, want) || (k.tomb == nil) != (want == nil) {
			t.Errorf("%q: tomb key %x, want %x", id, k.tomb, want)
		}
		if cap(k.receipt) != len(k.receipt) {
			t.Errorf("%q: receipt key has room to grow into the tomb key (cap %d, len %d)", id, cap(k.receipt), len(k.receipt))
		}
	}
	id := Bind("alice", "orders", "k1")
	if n := testing.AllocsPerRun(100, func() { keysOf(id) }); n > 1 {
		t.Errorf("keysOf: %v allocations, want 1", n)
	}
}
