package receipt

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"

	"github.com/idemdb/idem/fault"

	"github.com/idemdb/idem/table"
)

// KeyBytesMax bounds an Idempotency-Key: 1..255 visible ASCII characters.
const KeyBytesMax = 255

// ValidKey reports whether k is a valid Idempotency-Key.
func ValidKey(k string) bool {
	if len(k) == 0 || len(k) > KeyBytesMax {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// Bind returns the transaction ID of (principal, table, key):
// hex(SHA-256(len‖principal ‖ len‖table ‖ len‖key))[:32], lengths as 4-byte
// big-endian, so no two triples collide by concatenation.
func Bind(principal, tbl, key string) string {
	// The hashed bytes are laid out on the stack when they fit (a key is
	// at most KeyBytesMax bytes, a table name short): Bind is on every
	// keyed request, and the ID string is then its one allocation.
	var stack [bindInPlaceBytes]byte
	in := stack[:0]
	if n := 12 + len(principal) + len(tbl) + len(key); n > len(stack) {
		in = make([]byte, 0, n)
	}
	for _, s := range [...]string{principal, tbl, key} {
		in = binary.BigEndian.AppendUint32(in, uint32(len(s)))
		in = append(in, s...)
	}
	sum := sha256.Sum256(in)
	var id [2 * txnIDBytes]byte
	hex.Encode(id[:], sum[:txnIDBytes])
	return string(id[:])
}

// bindInPlaceBytes is how much of Bind's input it keeps on the stack.
const bindInPlaceBytes = 512

// canonicalRequest is what a receipt stores so that a successor can execute
// without the client; its SHA-256 is the request fingerprint.
type canonicalRequest struct {
	Table string          `json:"table"`
	Batch json.RawMessage `json:"batch"`
}

// Canonical encodes a validated batch for table canonically and returns the
// bytes and their fingerprint: {"table":<table>,"batch":<canonical batch>}
// (table names need no escaping: see table.ValidTableName).
func Canonical(tbl string, b *table.Batch) ([]byte, [32]byte, error) {
	cb, fp, err := fingerprint(tbl, b)
	if err != nil {
		return nil, [32]byte{}, err
	}
	return requestBytes(tbl, cb), fp, nil
}

// fingerprint is Canonical's fingerprint, hashed as the canonical request
// is laid out — its head, the batch's canonical bytes (cached by the
// batch), its tail — without writing the request (issue 41): only a
// pending receipt stores it (lazyRequest), and a keyed request on the
// one-write route never is one. It returns the batch's canonical bytes.
func fingerprint(tbl string, b *table.Batch) (cb []byte, fp [32]byte, err error) {
	if cb, err = b.Canonical(); err != nil {
		return nil, fp, err
	}
	if fault.Planted(fault.BugFingerprintIgnoresDeletes) && len(b.Deletes) > 0 { // planted only under -tags idem_selftest
		_, fp, err := fingerprint(tbl, &table.Batch{Inserts: b.Inserts, Transforms: b.Transforms})
		return cb, fp, err
	}
	h := sha256.New()
	h.Write([]byte(requestHead))
	h.Write([]byte(tbl))
	h.Write([]byte(requestMid))
	h.Write(cb)
	h.Write([]byte(requestTail))
	h.Sum(fp[:0])
	return cb, fp, nil
}

// The canonical request around its table name and batch.
const (
	requestHead = `{"table":"`
	requestMid  = `","batch":`
	requestTail = `}`
)

// requestBytes lays out the canonical request of tbl's batch, cb being
// the batch's canonical bytes.
func requestBytes(tbl string, cb []byte) []byte {
	enc := make([]byte, 0, len(requestHead)+len(tbl)+len(requestMid)+len(cb)+len(requestTail))
	enc = append(enc, requestHead...)
	enc = append(enc, tbl...)
	enc = append(enc, requestMid...)
	enc = append(enc, cb...)
	return append(enc, requestTail...)
}

// lazyRequest is a keyed receipt's canonical request not yet laid out:
// EncodeRecord writes it into a pending record, the only state that
// stores it, and drops it otherwise.
type lazyRequest struct {
	table string
	batch []byte // the batch's canonical bytes (immutable, the batch's cache)
}

// decodeRequest reverses Canonical.
func decodeRequest(enc []byte) (string, *table.Batch, error) {
	var cr canonicalRequest
	if err := json.Unmarshal(enc, &cr); err != nil {
		return "", nil, err
	}
	b, err := table.DecodeBatch(cr.Batch)
	if err != nil {
		return "", nil, err
	}
	return cr.Table, b, nil
}
