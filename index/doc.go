// Package index holds Idem's ordered in-memory indexes on
// github.com/google/btree's BTreeG (vendored as internal/btree, which adds
// a bulk build from sorted items: internal/btree/PATCH.md): the engine's
// key space (KV, ordered by key bytes, keyspace.go; a key ending in 32
// lowercase hex digits may be held packed, packedkey.go) and the lease
// layer's renewal active set (an ordered set of IDs, ordered.go).
//
// An Ordered is not safe for concurrent mutation; its owner serialises
// writers and takes snapshots with Clone under that same lock. A clone is
// O(1) (copy-on-write) and may be read concurrently with later writes to the
// original.
package index
