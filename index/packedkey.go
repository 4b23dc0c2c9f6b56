package index

import (
	"bytes"
	"unsafe"
)

// A packed key: a key whose last hexChars bytes are lowercase hex (a
// receipt's, rcpt/v1/<32 hex>) is stored as its prefix and the packedTail
// bytes they spell, 16 bytes less per key in a checkpoint's image and so in
// RAM (issue 41; docs/engine.md, "The value log"). The packing is the
// image's and the item's only: every path that hands a key out gets its raw
// bytes (Key, AppendKey), and keys compare as their raw bytes do
// (CompareKey).
const (
	hexChars   = 32
	packedTail = hexChars / 2
	// packedBit marks an item's klen as the length of a packed key (keys
	// are bounded far below 2 GiB, so the length's top bit is free).
	packedBit = 1 << 31
)

const hexDigits = "0123456789abcdef"

// Packable reports whether key ends in hexChars lowercase hex digits.
func Packable(key []byte) bool {
	if len(key) < hexChars {
		return false
	}
	for _, c := range key[len(key)-hexChars:] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// AppendStoredKey appends key's stored form to dst, packed if Packable,
// and reports whether it packed it.
func AppendStoredKey(dst, key []byte) ([]byte, bool) {
	if !Packable(key) {
		return append(dst, key...), false
	}
	pre := len(key) - hexChars
	dst = append(dst, key[:pre]...)
	for i := pre; i < len(key); i += 2 {
		dst = append(dst, nibble(key[i])<<4|nibble(key[i+1]))
	}
	return dst, true
}

func nibble(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

// WithPackedKey returns e marking its klen stored bytes as a packed key
// (at least packedTail of them: a decoder checks that, PackedKeyOK).
func (e KV) WithPackedKey() KV {
	e.klen |= packedBit
	return e
}

// PackedKeyOK reports whether n stored bytes can be a packed key.
func PackedKeyOK(n int) bool { return n >= packedTail }

// StoredProbe is a key-only item of a key in its stored form.
func StoredProbe(stored []byte, packed bool) KV {
	kv := Probe(stored)
	if packed {
		kv = kv.WithPackedKey()
	}
	return kv
}

// KeyPacked reports whether the item's key is stored packed.
func (e KV) KeyPacked() bool { return e.klen&packedBit != 0 }

// storedLen is the length of the key's stored form.
func (e KV) storedLen() uint32 { return e.klen &^ packedBit }

// StoredKey returns the key as the item stores it (shared; do not modify):
// packed if KeyPacked.
func (e KV) StoredKey() []byte {
	if e.p == nil {
		return nil
	}
	return unsafe.Slice(e.p, e.storedLen())
}

// KeyLen is the length of the key's raw bytes.
func (e KV) KeyLen() int {
	if e.KeyPacked() {
		return int(e.storedLen()) + packedTail
	}
	return int(e.klen)
}

// AppendStoredKey appends the key's stored form as a checkpoint record
// of the packed formats holds it — packed if it is packed or Packable —
// and reports whether it is packed.
func (e KV) AppendStoredKey(dst []byte) ([]byte, bool) {
	if e.KeyPacked() {
		return append(dst, e.StoredKey()...), true
	}
	return AppendStoredKey(dst, e.StoredKey())
}

// AppendKey appends the key's raw bytes to dst.
func (e KV) AppendKey(dst []byte) []byte {
	s := e.StoredKey()
	if !e.KeyPacked() {
		return append(dst, s...)
	}
	pre := len(s) - packedTail
	dst = append(dst, s[:pre]...)
	for _, b := range s[pre:] {
		dst = append(dst, hexDigits[b>>4], hexDigits[b&15])
	}
	return dst
}

// CopyKey copies the first len(dst) bytes of the key's raw bytes (fewer if
// the key is shorter) into dst and returns how many it copied.
func (e KV) CopyKey(dst []byte) int {
	s := e.StoredKey()
	if !e.KeyPacked() {
		return copy(dst, s)
	}
	h, t := s[:len(s)-packedTail], s[len(s)-packedTail:]
	n := copy(dst, h)
	for i := 0; n < len(dst) && i < 2*packedTail; i, n = i+1, n+1 {
		dst[n] = rawTailAt(t, i)
	}
	return n
}

// CompareKey orders e's and o's keys as bytes.Compare orders their raw
// bytes, without allocating. Two raw keys, and two packed keys with
// prefixes of one length, compare as their stored bytes: '0'…'9' < 'a'…'f'
// are the nibbles 0…15 in order. Any other pair compares byte by byte
// past the prefixes they share, stopping at the first difference.
func (e KV) CompareKey(o KV) int {
	a, b := e.StoredKey(), o.StoredKey()
	ap, bp := e.KeyPacked(), o.KeyPacked()
	switch {
	case ap == bp && (!ap || len(a) == len(b)):
		return bytes.Compare(a, b)
	case ap == bp:
		return compareMixed(a, ap, b, bp)
	case bp:
		return compareRawPacked(a, b)
	case ap:
		return -compareRawPacked(b, a)
	}
	panic("unreachable")
}

// compareRawPacked orders a raw key r and a packed stored key s: the
// tree's descent with a raw probe or a raw item (a Put's) among packed
// items. Past s's prefix, r's hex digits are read two at a time as the
// byte they spell, which orders as the two digits do, so the walk is one
// step per byte of s's tail until the first difference; a non-hex digit
// there is left to compareMixed.
func compareRawPacked(r, s []byte) int {
	h, t := s[:len(s)-packedTail], s[len(s)-packedTail:]
	if len(r) < len(h) {
		if c := bytes.Compare(r, h[:len(r)]); c != 0 {
			return c
		}
		return -1
	}
	if c := bytes.Compare(r[:len(h)], h); c != 0 {
		return c
	}
	rt := r[len(h):]
	for j, b := range t {
		if 2*j+1 >= len(rt) {
			return compareMixed(r, false, s, true)
		}
		hi, lo := hexVal[rt[2*j]], hexVal[rt[2*j+1]]
		if hi|lo > 15 {
			return compareMixed(r, false, s, true)
		}
		if rb := hi<<4 | lo; rb != b {
			if rb < b {
				return -1
			}
			return 1
		}
	}
	if len(rt) > hexChars { // s's raw key is a prefix of r
		return 1
	}
	return 0
}

// hexVal is a lowercase hex digit's value, 0xff for any other byte.
var hexVal = func() (v [256]byte) {
	for i := range v {
		v[i] = 0xff
	}
	for i := range 16 {
		v[hexDigits[i]] = byte(i)
	}
	return v
}()

func compareMixed(a []byte, ap bool, b []byte, bp bool) int {
	ah, at := splitStored(a, ap)
	bh, bt := splitStored(b, bp)
	n := min(len(ah), len(bh))
	if c := bytes.Compare(ah[:n], bh[:n]); c != 0 {
		return c
	}
	al, bl := len(ah)+2*len(at), len(bh)+2*len(bt)
	for i := n; i < min(al, bl); i++ {
		x, y := rawAt(ah, at, i), rawAt(bh, bt, i)
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	switch {
	case al < bl:
		return -1
	case al > bl:
		return 1
	}
	return 0
}

// splitStored splits a stored key into the bytes it holds raw and the
// packed tail (nil for a raw key).
func splitStored(s []byte, packed bool) (head, tail []byte) {
	if !packed {
		return s, nil
	}
	return s[:len(s)-packedTail], s[len(s)-packedTail:]
}

// rawAt is byte i of the raw key head ‖ hex(tail).
func rawAt(head, tail []byte, i int) byte {
	if i < len(head) {
		return head[i]
	}
	return rawTailAt(tail, i-len(head))
}

// rawTailAt is hex digit i of the packed tail.
func rawTailAt(tail []byte, i int) byte {
	b := tail[i>>1]
	if i&1 == 0 {
		return hexDigits[b>>4]
	}
	return hexDigits[b&15]
}
