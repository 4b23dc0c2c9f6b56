package receipt

import (
	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/store"
)

// ColdValue is engine.Options.ColdValue for a store the receipt layer
// runs on: the values that never change again and are read only by a
// replay, a lookup or an operator — terminal receipts (the complete
// envelope, most of a retained receipt's bytes) and tombstones — live in
// the engine's value log, and RAM keeps their keys and a pointer. Mutable
// receipts, leases, indexes and sessions stay in RAM: the request path
// reads and conditions on them. So do plain expiry entries (their value
// is empty); the chunks that fold them (expfold.go, tombclean.go) are
// read only by the cleaner and a listing.
//
// Documents of at least docColdBytesMin bytes go to the value log too
// (issue 38): the engine moves a value only at the checkpoint after its
// write, so a document there is one not rewritten for a checkpoint
// interval. Conditions on it need only its version, which stays in RAM
// with its key; an insert reads nothing; a transform, a delete's read and
// a document read pay one pread and a CRC check. A store whose every
// batch inserts new documents (most of a growing store's bytes) then
// keeps about 60 bytes of RAM and checkpoint per document instead of the
// whole document, which is what bounds a restart's load of the chain.
//
// A terminal receipt still owing visibility debt stays in RAM too: it is
// written again when the debt is paid, and only then moves. So a receipt
// in the value log is terminal and owes nothing, which Summary counts on.
func ColdValue(key, value []byte) bool {
	switch {
	case store.NSTomb.Has(key):
		return true
	case store.NSExpiry.Has(key):
		return expiryChunkKey(key)
	case store.NSTable.Has(key):
		return len(value) >= docColdBytesMin
	case store.NSReceipt.Has(key):
		var head recordState
		return cbor.Unmarshal(value, &head) == nil && head.State == Terminal && head.Debt == 0
	}
	return false
}

// expiryChunkKey reports whether an expiry key names a chunk of receipts
// (exp/v1/c/…) or of tombstones (exp/v1/<20-digit deadline>/t…).
func expiryChunkKey(key []byte) bool {
	at := len(store.NSExpiry) + 21
	return isRcptChunkKey(key) || (len(key) > at && key[at] == tombChunkPrefix[0])
}

// docColdBytesMin is the smallest document the value log takes: below it,
// the RAM a pointer saves (the document less 12 bytes) is not worth a
// pread on every read of the document.
const docColdBytesMin = 64
