package engine

import (
	"bytes"
	"slices"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// condScanMax is the most conditions treeVersions sorts on the stack; a
// keyed request has 18 (its transaction's record and decision, its receipt
// and tombstone, and per shard the table's metadata and each document's
// intent).
const condScanMax = 32

// treeVersions appends to found, for each of conds in order, the version
// of its key in the tree (0: absent). Caller holds treeMu.
//
// The keys are visited in ascending order and each descent is a Ceil: the
// item it returns bounds a gap that holds no key, so every later key below
// that item is absent and one equal to it is that item, without a descent
// of its own. A keyed request's conditions fall in few gaps: its
// documents' intents in the empty intent namespace, one table's metadata
// checked once per shard, and on a store without tombstones or
// transaction records its tombstone, record and decision past the last
// document. Of its 18 descents, that leaves 3: the intents', the
// receipt's, the tombstone's.
func (db *DB) treeVersions(conds []store.Condition, found []store.Version) []store.Version {
	var buf [condScanMax]uint8
	order := buf[:0]
	if len(conds) > condScanMax {
		return db.treeVersionsEach(conds, found)
	}
	for i := range conds {
		order = append(order, uint8(i))
	}
	slices.SortFunc(order, func(a, b uint8) int { return bytes.Compare(conds[a].Key, conds[b].Key) })
	start := len(found)
	found = append(found, make([]store.Version, len(conds))...)
	var next index.KV
	hasNext, valid := false, false
	for _, i := range order {
		probe := index.Probe(conds[i].Key)
		c := 1 // the key is past the gap: descend
		if valid {
			if !hasNext {
				continue // nothing at or after the last key: absent
			}
			c = probe.CompareKey(next)
		}
		if c > 0 {
			next, hasNext = db.tree.Ceil(probe)
			valid = true
			if !hasNext {
				continue
			}
			c = probe.CompareKey(next)
		}
		if c == 0 {
			found[start+int(i)] = store.Version(next.Version())
		}
	}
	return found
}

// treeVersionsEach is treeVersions with a descent per condition, for a
// batch with more conditions than it sorts on the stack.
func (db *DB) treeVersionsEach(conds []store.Condition, found []store.Version) []store.Version {
	for _, c := range conds {
		var v store.Version
		if it, ok := db.tree.Get(index.Probe(c.Key)); ok {
			v = store.Version(it.Version())
		}
		found = append(found, v)
	}
	return found
}
