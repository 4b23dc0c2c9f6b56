package engine

import (
	"bytes"
	"slices"

	"github.com/idemdb/idem/store"
)

// sortOps orders a link's live ops by key, stably, on the caller's
// goroutine before the batch is sequenced, so that the WAL writer, which
// publishes every durable group under treeMu (installDurable), puts them
// in ascending order through one finger: a keyed request's ten documents
// sit in four shards' runs of adjacent keys, and each put after the first
// of a run finds its leaf without a descent from the root (issue 41).
// Stable: a key a batch writes twice keeps its last write last, in the
// tree as in pending. Only the tree's copy is sorted: the log's body keeps
// the caller's order (encodeLinks encodes b.Ops), and a batch installs
// the same state in either order, since a key's writes keep theirs.
func sortOps(ops []store.Op) {
	slices.SortStableFunc(ops, func(a, b store.Op) int { return bytes.Compare(a.Key, b.Key) })
}
