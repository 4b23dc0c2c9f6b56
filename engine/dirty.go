package engine

import (
	"bytes"
	"cmp"
	"slices"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/internal/hugepage"
)

// Dirty keys: what a delta checkpoint writes (delta.go).
//
// Every key a durable batch writes is noted, in log order, from the
// snapshot of the newest checkpoint link on. A delta checkpoint then needs
// only these keys' values at its own snapshot, not the whole store: its
// cost follows what changed, not what is stored.
//
// Keys are copied into an arena rather than aliasing the tree's items, so
// that a key deleted or overwritten since does not keep its value's memory
// alive until the next checkpoint. The set is bounded (dirtyBytesMax): a
// store whose checkpoints keep failing would otherwise grow it with the
// log. Past the bound it is dropped and marked lost, and the next
// checkpoint rewrites the whole store, which needs no dirty set.

// dirtyBytesMax bounds the dirty set's memory: its keys' bytes and a slice
// header per noted write. 64 MiB holds the keys of about a million writes,
// several checkpoint intervals of a keyed workload.
const dirtyBytesMax = 64 << 20

// The arena's chunks start small and double up to dirtyChunkBytes: a store
// that writes a few keys between checkpoints (an idle one, or one just
// reopened) holds kilobytes, not a megabyte, for them.
const (
	dirtyChunkMinBytes = 4 << 10
	dirtyChunkBytes    = 1 << 20
)

// dirtyKey is one noted write: its key, and whether the key was present
// just before it. For a key's first write since the link, that says
// whether the link's files hold it: a key that was absent then and is
// absent now needs no tombstone.
type dirtyKey struct {
	key     []byte
	seq     uint32 // its place in write order (the set's bound keeps it small)
	existed bool
}

// dirtySet notes the keys written since a checkpoint link's snapshot.
// Callers serialize access (treeMu, or sole ownership during recovery).
type dirtySet struct {
	keys  []dirtyKey // repeats included; seq gives the write order
	next  uint32     // the next write's seq
	chunk []byte     // the arena's current chunk
	bytes int        // memory held: key bytes and headers
	max   int        // the bound (dirtyBytesMax; tests shrink it)
	lost  bool       // a write went unnoted: only a full checkpoint is exact
}

func newDirtySet() *dirtySet { return &dirtySet{max: dirtyBytesMax} }

// note records a write of key, which existed (was present) just before.
func (d *dirtySet) note(key []byte, existed bool) {
	if !d.admit(len(key)) {
		return
	}
	if len(key) > cap(d.chunk)-len(d.chunk) {
		d.chunk = make([]byte, 0, max(min(2*cap(d.chunk), dirtyChunkBytes), dirtyChunkMinBytes, len(key)))
	}
	d.chunk = append(d.chunk, key...)
	d.push(d.chunk[len(d.chunk)-len(key):len(d.chunk):len(d.chunk)], existed)
}

// noteShared is note for a key that is immutable and that the set may
// keep as it is: a put replayed at open, whose key already sits in the
// replay's arena (recover.go). Its chunk then stays alive until the set is
// taken — memory the open's replay holds anyway, about two checkpoint
// intervals of log at most — and the key is not copied a second time.
func (d *dirtySet) noteShared(key []byte, existed bool) {
	if d.admit(len(key)) {
		d.push(key[:len(key):len(key)], existed)
	}
}

// admit counts a write of klen key bytes against the bound, and drops the
// set, marked lost, past it.
func (d *dirtySet) admit(klen int) bool {
	if d.lost {
		return false
	}
	if d.bytes+klen+dirtyHeaderBytes > d.max {
		*d = dirtySet{max: d.max, lost: true}
		return false
	}
	d.bytes += klen + dirtyHeaderBytes
	return true
}

// dirtyHeaderBytes is what a noted write counts against the bound beside
// its key's bytes: its entry in the list.
const dirtyHeaderBytes = 32

func (d *dirtySet) push(key []byte, existed bool) {
	if len(d.keys) == cap(d.keys) {
		d.grow(max(len(d.keys), dirtyKeysMin))
	}
	d.keys = append(d.keys, dirtyKey{key: key, seq: d.next, existed: existed})
	d.next++
}

// reserve makes room for about n more writes at once, within the bound:
// an open's replay, sized from its log (replaypipe.go). Doubling to half
// a million from dirtyKeysMin allocated and copied the list about twice
// over, a tenth of the replay's applier at 1 M receipts.
func (d *dirtySet) reserve(n int) {
	n = min(n, (d.max-d.bytes)/dirtyHeaderBytes)
	if d.lost || n <= cap(d.keys)-len(d.keys) {
		return
	}
	d.grow(n)
}

// grow moves the list into fresh memory with room for n more writes. A
// replay notes every key it reads: at 1 M receipts the list's doublings
// were a sixth of an open's page faults, most of them in its last few,
// which huge pages take at a fault per 2 MiB.
func (d *dirtySet) grow(n int) {
	d.keys = append(hugepage.Make[dirtyKey](len(d.keys)+n), d.keys...)
}

// take returns the set noted so far and starts an empty one.
func (d *dirtySet) take() *dirtySet {
	taken := *d
	// The next interval writes about as many keys as this one: sized so,
	// its list is not grown (and copied) from empty, doubling by doubling.
	*d = dirtySet{max: d.max, keys: make([]dirtyKey, 0, min(len(taken.keys), dirtyKeysHintMax))}
	return &taken
}

// dirtyKeysMin is the list's first capacity. Past it the list doubles:
// append alone grows a large slice by a quarter, so a replay noting half a
// million keys allocated and copied the list about five times over (most
// of the dirty set's 0.41 s in an open's CPU profile at 1 M receipts).
const dirtyKeysMin = 1 << 10

// dirtyKeysHintMax caps the list take sizes for the next interval.
const dirtyKeysHintMax = 1 << 16

// reset empties the set, lost or not: a full checkpoint's snapshot is
// being taken, and the next delta builds on it.
func (d *dirtySet) reset() { *d = dirtySet{max: d.max} }

// restore puts back a taken set whose delta failed: its keys are noted
// before those written since, so the next delta still covers them.
func (d *dirtySet) restore(taken *dirtySet) {
	if taken.lost || d.lost || taken.bytes+d.bytes > d.max {
		*d = dirtySet{max: d.max, lost: true}
		return
	}
	for i := range d.keys {
		d.keys[i].seq += taken.next
	}
	d.keys = append(taken.keys, d.keys...)
	d.next += taken.next
	d.bytes += taken.bytes
}

// sortDistinct sorts the set by key, keeping of each key only its first
// write (lowest seq), and returns it. The set stays valid: restore may
// still take it back.
func (d *dirtySet) sortDistinct() []dirtyKey {
	slices.SortFunc(d.keys, func(a, b dirtyKey) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	d.keys = slices.CompactFunc(d.keys, func(a, b dirtyKey) bool { return bytes.Equal(a.key, b.key) })
	return d.keys
}

// dirtyGallop bounds how many items that are not dirty an ascent over the
// dirty keys passes before it seeks the next dirty key afresh: passing an
// item costs one key comparison, a seek about twenty (a descent of a tree
// of a million items).
const dirtyGallop = 8

// atSnapshot calls fn, in key order, for each of keys (sorted and
// distinct: sortDistinct's) with tree's item for it if tree holds one.
// Keys close together in the tree are found by one ascent instead of a
// descent each: a delta's often are (BenchmarkDiskKeyed's second delta
// holds about 310 000 of some 670 000 items), and there the descents
// were a quarter of the delta's CPU.
// fn's error stops the walk and is returned.
func atSnapshot(tree *index.Ordered[index.KV], keys []dirtyKey, fn func(k dirtyKey, it index.KV, ok bool) error) error {
	var err error
	for len(keys) > 0 && err == nil {
		passed, stopped := 0, false
		tree.Ascend(index.Probe(keys[0].key), func(it index.KV) bool {
			for len(keys) > 0 && err == nil {
				c := it.CompareKey(index.Probe(keys[0].key))
				if c < 0 {
					passed++
					stopped = passed >= dirtyGallop
					return !stopped
				}
				if c == 0 {
					err, keys, passed = fn(keys[0], it, true), keys[1:], 0
					break
				}
				err, keys = fn(keys[0], index.KV{}, false), keys[1:]
			}
			stopped = len(keys) == 0 || err != nil
			return !stopped
		})
		for ; !stopped && len(keys) > 0 && err == nil; keys = keys[1:] {
			err = fn(keys[0], index.KV{}, false) // past the tree's last item
		}
	}
	return err
}
