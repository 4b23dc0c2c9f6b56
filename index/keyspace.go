package index

import "bytes"

// KV is one key of the engine's key space. Key and value share one byte
// slice (key first) and the item is 40 bytes rather than the 56 of two
// slices, which matters twice over in B-tree nodes: less to shift on insert,
// less memory per retained key. The bytes are immutable once inserted;
// Version is the log index of the batch that last wrote the key.
type KV struct {
	kv      []byte // key ‖ value
	klen    uint32
	Version uint64
}

// PackedKV wraps buf = key ‖ value (klen bytes of key) without copying; buf
// must not change afterwards.
func PackedKV(buf []byte, klen int, version uint64) KV {
	return KV{kv: buf, klen: uint32(klen), Version: version}
}

// Probe is a key-only item for lookups and range bounds.
func Probe(key []byte) KV { return KV{kv: key, klen: uint32(len(key))} }

// Key returns the key (shared; do not modify).
func (e KV) Key() []byte { return e.kv[:e.klen:e.klen] }

// Value returns the value (shared; do not modify).
func (e KV) Value() []byte { return e.kv[e.klen:len(e.kv):len(e.kv)] }

func kvLess(a, b KV) bool { return bytes.Compare(a.kv[:a.klen], b.kv[:b.klen]) < 0 }

// NewKeySpace returns an empty primary key space ordered by key bytes.
func NewKeySpace() *Ordered[KV] { return NewOrdered(kvLess) }

// NewIDSet returns an empty set of string IDs (the renewal active set).
func NewIDSet() *Ordered[string] { return NewOrdered(func(a, b string) bool { return a < b }) }
