package index

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unsafe"
)

// KV is one key of the engine's key space. Key, value and version share
// one allocation, key ‖ value ‖ uvarint(version) — the layout of a
// checkpoint's record after its lengths, so that a loaded item aliases the
// file's image — held by a bare pointer and two lengths: the item is 16
// bytes rather than the 56 of two slices, the 40 of one, or the 24 it was
// with the version beside the lengths. That matters twice over in B-tree
// nodes: less to shift on insert, less memory per retained key (the 8
// bytes were a tenth of a retained receipt's RAM with the value log,
// issue 41). The bytes are immutable once inserted; the version is the
// log index of the batch that last wrote the key.
//
// The lengths' spare bits hold the key's abbreviation (abbrev.go), which
// kvLess compares before the keys.
type KV struct {
	p *byte // key ‖ value ‖ uvarint(version)
	// klen: the key's length, the abbreviation's high bits above it.
	// vlen: the value's length, the abbreviation's low bits above it,
	// indirectBit on top.
	klen, vlen uint32
}

// indirectBit marks an item whose stored bytes are not its value but a
// pointer to it in the engine's value log (values are bounded far below
// 2 GiB, so the length's top bit is free).
const indirectBit = 1 << 31

// PackedKV wraps buf = key ‖ value ‖ uvarint(version) (klen bytes of key,
// vlen of value) without copying; buf must not change afterwards.
func PackedKV(buf []byte, klen, vlen int) KV {
	return withAbbrev(unsafe.SliceData(buf), buf[:klen], vlen)
}

// withAbbrev is the item of key at p and a value of vlen bytes, with the
// key's abbreviation. The store's limits keep keys and values far inside
// their bits (klenBits); an item past them is a broken invariant.
func withAbbrev(p *byte, key []byte, vlen int) KV {
	if len(key) > klenMask || vlen > vlenMask {
		panic(fmt.Sprintf("index: invariant broken: a key of %d bytes or a value of %d bytes overflows an item's lengths", len(key), vlen))
	}
	a := abbrev(key)
	return KV{p: p, klen: uint32(len(key)) | a>>abbrevLowBits<<klenBits,
		vlen: uint32(vlen) | (a&(1<<abbrevLowBits-1))<<vlenBits}
}

// abbreviation is the item's abbreviation.
func (e KV) abbreviation() uint32 {
	return e.klen>>klenBits<<abbrevLowBits | e.vlen&^indirectBit>>vlenBits
}

// keyLen and valueLen are the item's lengths without the abbreviation.
func (e KV) keyLen() uint32   { return e.klen & klenMask }
func (e KV) valueLen() uint32 { return e.vlen & vlenMask }

// IndirectKV wraps buf = key ‖ pointer ‖ uvarint(version): an item whose
// value lives in the engine's value log, pointer (plen bytes) being where.
// Value returns the pointer.
func IndirectKV(buf []byte, klen, plen int) KV {
	kv := PackedKV(buf, klen, plen)
	kv.vlen |= indirectBit
	return kv
}

// AppendKV appends key ‖ value ‖ uvarint(version) to dst: the bytes of an
// item (PackedKV, IndirectKV) made from parts.
func AppendKV(dst, key, value []byte, version uint64) []byte {
	return binary.AppendUvarint(append(append(dst, key...), value...), version)
}

// Indirect reports whether the item's value lives in the value log: then
// Value is the pointer, not the value.
func (e KV) Indirect() bool { return e.vlen&indirectBit != 0 }

// Version is the log index of the batch that last wrote the key, read from
// the bytes after the value (never called on a Probe, which has none). It
// reads byte by byte, never a slice past the varint's end, which may be
// the allocation's.
func (e KV) Version() uint64 {
	at := unsafe.Add(unsafe.Pointer(e.p), uintptr(e.keyLen())+uintptr(e.valueLen()))
	var v uint64
	for i, shift := 0, uint(0); i < binary.MaxVarintLen64; i, shift = i+1, shift+7 {
		b := *(*byte)(unsafe.Add(at, i))
		if b < 0x80 {
			return v | uint64(b)<<shift
		}
		v |= uint64(b&0x7f) << shift
	}
	return v
}

// Probe is a key-only item for lookups and range bounds. A key longer than an item's may hold orders as its first klenMask bytes
// do against every item, whose keys are far shorter (store.KeyBytesMax).
func Probe(key []byte) KV {
	return withAbbrev(unsafe.SliceData(key), key[:min(len(key), klenMask)], 0)
}

// Key returns the key (shared; do not modify).
func (e KV) Key() []byte {
	if e.p == nil {
		return nil
	}
	return unsafe.Slice(e.p, e.keyLen())
}

// Value returns the stored bytes (shared; do not modify): the value, or
// for an Indirect item the pointer to it. An empty value is an
// empty slice at the key's start, never a pointer past the allocation.
func (e KV) Value() []byte {
	vlen := e.valueLen()
	if vlen == 0 {
		if e.p == nil {
			return nil
		}
		return unsafe.Slice(e.p, 0)
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(e.p), e.keyLen())), vlen)
}

// kvLess orders items by key: by their abbreviations when both have one
// and they differ (abbrev.go), else by the keys' bytes.
func kvLess(a, b KV) bool {
	if x, y := a.abbreviation(), b.abbreviation(); x != y {
		return x < y
	}
	return bytes.Compare(a.Key(), b.Key()) < 0
}

// NewKeySpace returns an empty primary key space ordered by key bytes.
func NewKeySpace() *Ordered[KV] { return NewOrdered(kvLess) }

// NewSortedKeySpace returns a key space of sorted, which must be in
// strictly increasing key order (a checkpoint's records are), and becomes
// the key space's.
func NewSortedKeySpace(sorted []KV) *Ordered[KV] { return NewSortedOrdered(kvLess, sorted) }

// NewIDSet returns an empty set of string IDs (the renewal active set).
func NewIDSet() *Ordered[string] { return NewOrdered(func(a, b string) bool { return a < b }) }
