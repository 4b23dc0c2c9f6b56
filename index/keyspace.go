package index

import (
	"bytes"
	"unsafe"
)

// KV is one key of the engine's key space. Key and value share one
// allocation (key first), held by a bare pointer and two lengths: the item
// is 24 bytes rather than the 56 of two slices or the 40 of one, which
// matters twice over in B-tree nodes — less to shift on insert, less memory
// per retained key. The bytes are immutable once inserted; Version is the
// log index of the batch that last wrote the key.
type KV struct {
	p          *byte // key ‖ value
	klen, vlen uint32
	Version    uint64
}

// indirectBit marks an item whose stored bytes are not its value but a
// pointer to it in the engine's value log (values are bounded far below
// 2 GiB, so the length's top bit is free).
const indirectBit = 1 << 31

// PackedKV wraps buf = key ‖ value (klen bytes of key) without copying; buf
// must not change afterwards.
func PackedKV(buf []byte, klen int, version uint64) KV {
	return KV{p: unsafe.SliceData(buf), klen: uint32(klen), vlen: uint32(len(buf) - klen), Version: version}
}

// IndirectKV wraps buf = key ‖ pointer: an item whose value lives in the
// engine's value log, pointer being where. Value returns the pointer.
func IndirectKV(buf []byte, klen int, version uint64) KV {
	kv := PackedKV(buf, klen, version)
	kv.vlen |= indirectBit
	return kv
}

// Indirect reports whether the item's value lives in the value log: then
// Value is the pointer, not the value.
func (e KV) Indirect() bool { return e.vlen&indirectBit != 0 }

// Probe is a key-only item for lookups and range bounds.
func Probe(key []byte) KV { return KV{p: unsafe.SliceData(key), klen: uint32(len(key))} }

// Key returns the key (shared; do not modify).
func (e KV) Key() []byte {
	if e.p == nil {
		return nil
	}
	return unsafe.Slice(e.p, e.klen)
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
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(e.p), e.klen)), vlen)
}

func kvLess(a, b KV) bool { return bytes.Compare(a.Key(), b.Key()) < 0 }

// NewKeySpace returns an empty primary key space ordered by key bytes.
func NewKeySpace() *Ordered[KV] { return NewOrdered(kvLess) }

// NewSortedKeySpace returns a key space of sorted, which must be in
// strictly increasing key order (a checkpoint's records are), and becomes
// the key space's.
func NewSortedKeySpace(sorted []KV) *Ordered[KV] { return NewSortedOrdered(kvLess, sorted) }

// NewIDSet returns an empty set of string IDs (the renewal active set).
func NewIDSet() *Ordered[string] { return NewOrdered(func(a, b string) bool { return a < b }) }
