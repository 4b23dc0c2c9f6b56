package table

import (
	"encoding/binary"
	"hash/crc32"
)

// An entry digest stands for one entry of a batch — an insert, a delete or
// a transform — so that a receipt can say which entries of another request
// differ from its own without keeping the request (a 422 key mismatch,
// docs/design.md §5.3): 2 bytes of the entry's list and document ID, 4 of its
// canonical encoding. They are a diagnosis, never a decision — the
// fingerprint (SHA-256 of the whole canonical request) decides — so
// checksums do: FNV-1a over list and ID (strings, hashed in place), CRC-32C
// over the entry, a fraction of a microsecond for a whole batch.
const (
	EntryDigestBytes = 6
	// EntryDigestsMax bounds the entries digested, and so what a receipt
	// carries for them (384 bytes); the rest are compared only through
	// the fingerprint.
	EntryDigestsMax = 64
)

// The lists of a batch in canonical order, as EntryDigest names them.
const (
	ListInserts    = "inserts"
	ListDeletes    = "deletes"
	ListTransforms = "transforms"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EntryDigests returns the lengths of the batch's three lists (uvarints,
// in canonical order: inserts, deletes, transforms) followed by the
// digests of its first EntryDigestsMax entries in that order — what a
// receipt keeps, in one slice (ParseEntryDigests reads it) — or nil for an
// invalid batch. Shared: do not modify.
func (b *Batch) EntryDigests() []byte {
	if b.Validate() != nil {
		return nil
	}
	return b.canon.Load().digests
}

// Entries is how many entries the batch has.
func (b *Batch) Entries() int { return b.docCount() }

// Entry returns the list, the index in it and the document ID of entry i
// in canonical order.
func (b *Batch) Entry(i int) (list string, index int, id string) {
	switch {
	case i < len(b.Inserts):
		return ListInserts, i, b.Inserts[i].ID
	case i < len(b.Inserts)+len(b.Deletes):
		i -= len(b.Inserts)
		return ListDeletes, i, b.Deletes[i]
	}
	i -= len(b.Inserts) + len(b.Deletes)
	return ListTransforms, i, b.Transforms[i].ID
}

// idDigest is the 2-byte digest of an entry's list and ID, as the first
// two bytes of its EntryDigest: FNV-1a, folded.
func idDigest(list, id string) uint16 {
	const offset, prime = 2166136261, 16777619
	h := uint32(offset)
	for _, s := range [...]string{list, "/", id} {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint32(s[i])) * prime
		}
	}
	return uint16(h ^ h>>16)
}

// ParseEntryDigests splits what EntryDigests returned (as a receipt kept
// it) into the lists' lengths and the digests; ok is false for bytes that
// are not that.
func ParseEntryDigests(b []byte) (lists [3]int, digests []byte, ok bool) {
	for i := range lists {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > batchEntriesLimit {
			return lists, nil, false
		}
		lists[i], b = int(n), b[k:]
	}
	if len(b)%EntryDigestBytes != 0 {
		return lists, nil, false
	}
	return lists, b, true
}

// batchEntriesLimit bounds a list length ParseEntryDigests accepts: far
// above any batch a store takes, so that a damaged length cannot be mistaken
// for one.
const batchEntriesLimit = 1 << 20

// entryDigests collects EntryDigests while build writes the batch: the
// lists' lengths first, then each entry's digest as the entry is written.
type entryDigests struct {
	out []byte
	n   int
}

func (b *Batch) newEntryDigests() entryDigests {
	d := entryDigests{out: make([]byte, 0, 3*binary.MaxVarintLen32+min(b.docCount(), EntryDigestsMax)*EntryDigestBytes)}
	for _, l := range [...]int{len(b.Inserts), len(b.Deletes), len(b.Transforms)} {
		d.out = binary.AppendUvarint(d.out, uint64(l))
	}
	return d
}

// add digests entry (its canonical bytes) of list with document ID id;
// past EntryDigestsMax entries it keeps nothing.
func (d *entryDigests) add(list, id string, entry []byte) {
	if d.n == EntryDigestsMax {
		return
	}
	d.out = binary.BigEndian.AppendUint16(d.out, idDigest(list, id))
	d.out = binary.BigEndian.AppendUint32(d.out, crc32.Checksum(entry, castagnoli))
	d.n++
}
