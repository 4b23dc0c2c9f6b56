package index

import (
	"bytes"
	"slices"

	"github.com/idemdb/idem/store"
)

// Abbreviated keys (issue 41). A lookup in the key space compares the
// probe with about six items in each node on its way down, and each
// comparison reads the item's key from its own allocation: on a key that
// lands at a random place — a receipt's rcpt/v1/<txn_id>, its tombstone
// — that is a cache miss per comparison, the largest part of what a keyed
// request's tree work costs over a key-less one's. An item therefore
// carries an abbreviation of its key in the length bits it does not need
// (lengthBits, below), and kvLess decides by the abbreviations alone when
// they differ, reading keys only when they tie.
//
// Every key starts with a namespace prefix of 7 to 10 bytes, so the
// abbreviation of a key's first bytes would tie on nearly every
// comparison. It is instead, in order: the key's place among the
// namespaces (abbrevClass: in which namespace, or in which gap between
// two), then the first bytes after the namespace's prefix (abbrevSuffixBits
// of them). Both parts are non-decreasing in key order, so a < b implies
// abbrev(a) <= abbrev(b): unequal abbreviations order their keys exactly
// as the keys do. A key in no namespace (an engine test's) gets its
// gap's class and no suffix bits: it ties with its neighbours and is
// compared in full.

// The bits of an item's lengths: a key uses klenBits of klen, a value (or
// value-log pointer) vlenBits of vlen below indirectBit; the rest hold the
// abbreviation, abbrevLowBits of it in vlen and the rest in klen. Keys are
// at most store.KeyBytesMax and values within store.BatchBytesMax, far
// below either.
const (
	klenBits      = 16
	vlenBits      = 24
	abbrevLowBits = 31 - vlenBits // 7
	abbrevBits    = 32 - klenBits + abbrevLowBits
	klenMask      = 1<<klenBits - 1
	vlenMask      = 1<<vlenBits - 1
)

// abbrevClassBits hold a key's class, 1 + its place among the 2n+1
// intervals the n namespace prefixes cut the key space into;
// abbrevSuffixBits the first bytes after its prefix.
const (
	abbrevClassBits  = 5
	abbrevSuffixBits = abbrevBits - abbrevClassBits
)

// abbrevPrefixes are store's namespaces, sorted. None is a prefix of
// another (TestAbbrevPrefixes), so a key has at most one.
var abbrevPrefixes = func() [][]byte {
	var ps [][]byte
	for _, ns := range store.Namespaces {
		ps = append(ps, []byte(ns))
	}
	slices.SortFunc(ps, bytes.Compare)
	if 2*len(ps)+2 > 1<<abbrevClassBits {
		panic("index: more namespaces than abbreviation classes")
	}
	return ps
}()

// abbrevFirst[c] is the span of abbrevPrefixes whose first byte is c:
// those before it start with a smaller byte, so lie below any key that
// starts with c, and those after it above.
var abbrevFirst = func() (t [256]struct{ lo, hi uint8 }) {
	for c := range t {
		for _, p := range abbrevPrefixes {
			if int(p[0]) < c {
				t[c].lo++
			}
			if int(p[0]) <= c {
				t[c].hi++
			}
		}
	}
	return t
}()

// abbrev is key's abbreviation. An item is made with it each time a key
// is written or loaded, so it reads no more than the key's first bytes
// against the prefixes that share its first byte (at most three).
func abbrev(key []byte) uint32 {
	if len(key) == 0 {
		return 1 << abbrevSuffixBits // below every prefix
	}
	// i: the prefixes at or below key, in byte order (a prefix of key is
	// below it); key lies in the namespace of prefix i-1, or in the gap
	// past it.
	span := abbrevFirst[key[0]]
	i := int(span.lo)
	for i < int(span.hi) && bytes.Compare(abbrevPrefixes[i], key) <= 0 {
		i++
	}
	if i == 0 || !bytes.HasPrefix(key, abbrevPrefixes[i-1]) {
		return uint32(2*i+1) << abbrevSuffixBits
	}
	rest := key[len(abbrevPrefixes[i-1]):]
	var s uint32 // the first three bytes of rest, zero-padded
	for j := range 3 {
		s <<= 8
		if j < len(rest) {
			s |= uint32(rest[j])
		}
	}
	return uint32(2*i)<<abbrevSuffixBits | s>>(24-abbrevSuffixBits)
}
