package receipt

import (
	"encoding/hex"

	"github.com/idemdb/idem/store"
)

// receiptKeys are a receipt's key and its tombstone's, built once for a
// keyed request: its lookup reads both (loadOrTombAt), and the write that
// creates the receipt conditions on both and puts the first
// (addAbsentReceipt). Built apart at each step they cost a new key four
// allocations; here one. The store keeps neither slice past the call it is
// given to (store.Batch stays the caller's once Apply returns), so both
// steps may share them.
type receiptKeys struct {
	receipt []byte
	tomb    []byte // nil for an ID that is not 32 hex digits, as tombKey
}

// keysOf returns id's receiptKeys in one allocation.
func keysOf(id string) receiptKeys {
	nr := len(store.NSReceipt) + len(id)
	buf := make([]byte, nr, nr+len(store.NSTomb)+txnIDBytes)
	copy(buf[copy(buf, store.NSReceipt):], id)
	k := receiptKeys{receipt: buf[:nr:nr]}
	if len(id) != 2*txnIDBytes {
		return k
	}
	tomb := append(buf[nr:], store.NSTomb...)
	tomb = tomb[:len(store.NSTomb)+txnIDBytes]
	if _, err := hex.Decode(tomb[len(store.NSTomb):], []byte(id)); err == nil {
		k.tomb = tomb
	}
	return k
}

// keys returns the receipt's keys, built on first use.
func (a *attempt) keys() receiptKeys {
	if a.rkeys.receipt == nil {
		a.rkeys = keysOf(a.id)
	}
	return a.rkeys
}
