package index

import (
	"encoding/binary"
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
type KV struct {
	p          *byte  // key ‖ value ‖ uvarint(version), the key as stored
	klen, vlen uint32 // klen's top bit: the key is packed (packedkey.go)
}

// indirectBit marks an item whose stored bytes are not its value but a
// pointer to it in the engine's value log (values are bounded far below
// 2 GiB, so the length's top bit is free).
const indirectBit = 1 << 31

// PackedKV wraps buf = key ‖ value ‖ uvarint(version) (klen bytes of key,
// vlen of value) without copying; buf must not change afterwards.
func PackedKV(buf []byte, klen, vlen int) KV {
	return KV{p: unsafe.SliceData(buf), klen: uint32(klen), vlen: uint32(vlen)}
}

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
	at := unsafe.Add(unsafe.Pointer(e.p), uintptr(e.storedLen())+uintptr(e.vlen&^indirectBit))
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

// Probe is a key-only item for lookups and range bounds.
func Probe(key []byte) KV { return KV{p: unsafe.SliceData(key), klen: uint32(len(key))} }

// Key returns the key's raw bytes: shared (do not modify) for a raw key,
// a new copy for a packed one. Paths that run per item take AppendKey,
// CopyKey or CompareKey instead.
func (e KV) Key() []byte {
	if e.KeyPacked() {
		return e.AppendKey(make([]byte, 0, e.KeyLen()))
	}
	return e.StoredKey()
}

// Value returns the stored bytes (shared; do not modify): the value, or
// for an Indirect item the pointer to it. An empty value is an
// empty slice at the key's start, never a pointer past the allocation.
func (e KV) Value() []byte {
	vlen := e.vlen &^ indirectBit
	if vlen == 0 {
		if e.p == nil {
			return nil
		}
		return unsafe.Slice(e.p, 0)
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(e.p), e.storedLen())), vlen)
}

func kvLess(a, b KV) bool { return a.CompareKey(b) < 0 }

// NewKeySpace returns an empty primary key space ordered by key bytes.
func NewKeySpace() *Ordered[KV] { return NewOrdered(kvLess) }

// NewSortedKeySpace returns a key space of sorted, which must be in
// strictly increasing key order (a checkpoint's records are), and becomes
// the key space's.
func NewSortedKeySpace(sorted []KV) *Ordered[KV] { return NewSortedOrdered(kvLess, sorted) }

// NewIDSet returns an empty set of string IDs (the renewal active set).
func NewIDSet() *Ordered[string] { return NewOrdered(func(a, b string) bool { return a < b }) }
