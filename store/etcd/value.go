package etcdstore

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/idemdb/idem/store"
)

// A stored value is an envelope: one format byte, the nonce of the Apply
// that wrote it, then the caller's value. The nonce is how Apply learns,
// after an ambiguous answer, whether its Txn committed (resolve.go); it
// costs envelopeBytes per key.
const (
	envelopeFormat = 1
	nonceBytes     = 8
	envelopeBytes  = 1 + nonceBytes
)

// Formats are the etcd value envelope's format and the restore epoch's
// (restore.go) as this build writes and reads them (docs/upgrading.md;
// idemd -version prints them).
func Formats() []store.Format {
	v := fmt.Sprint("envelope", envelopeFormat)
	r := fmt.Sprint("restored", restoreFormat)
	return []store.Format{{Name: "etcd value", Writes: v, Reads: []string{v}},
		{Name: "etcd restore epoch", Writes: r, Reads: []string{r}}}
}

// seal returns the stored form of value written by the Apply with nonce.
func seal(value []byte, nonce uint64) []byte {
	out := make([]byte, envelopeBytes+len(value))
	out[0] = envelopeFormat
	binary.BigEndian.PutUint64(out[1:envelopeBytes], nonce)
	copy(out[envelopeBytes:], value)
	return out
}

// unseal returns the caller's value and the writer's nonce. Anything that
// is not an envelope — a key some other program wrote under our prefix, a
// format from a later version — is corruption, never a value.
func unseal(key, stored []byte) (value []byte, nonce uint64, err error) {
	if len(stored) < envelopeBytes || stored[0] != envelopeFormat {
		return nil, 0, &store.ValueError{Key: bytes.Clone(key), Err: &store.CorruptionError{
			File:   fmt.Sprintf("etcd key %q", key),
			Reason: fmt.Sprintf("value of %d bytes is not an Idem envelope (format %d, %d-byte header)", len(stored), envelopeFormat, envelopeBytes),
		}}
	}
	return stored[envelopeBytes:], binary.BigEndian.Uint64(stored[1:envelopeBytes]), nil
}
