package twopc

import (
	"bytes"
	"testing"
)

// txnKeys builds in one allocation exactly the keys recordKey and
// decisionKey build apart, and neither can grow into the other.
func TestTxnKeysMatchTheKeyFunctions(t *testing.T) {
	for _, id := range []string{"0123456789abcdef0123456789abcdef", "t1", ""} {
		rec, dec := txnKeys(id)
		if !bytes.Equal(rec, recordKey(id)) || !bytes.Equal(dec, decisionKey(id)) {
			t.Errorf("%q: %q, %q; want %q, %q", id, rec, dec, recordKey(id), decisionKey(id))
		}
		if cap(rec) != len(rec) {
			t.Errorf("%q: the record key has room to grow into the decision key", id)
		}
	}
	id := "0123456789abcdef0123456789abcdef"
	if n := testing.AllocsPerRun(100, func() { txnKeys(id) }); n > 1 {
		t.Errorf("txnKeys: %v allocations, want 1", n)
	}
}
