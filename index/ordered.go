package index

import "github.com/idemdb/idem/internal/btree"

// degree is the B-tree branching factor: nodes hold up to 2*degree-1 items.
// 32 keeps nodes around one and a half kilobytes for the key space's
// 24-byte items (KV).
const degree = 32

// Ordered is an ordered set of T.
type Ordered[T any] struct {
	t    *btree.BTreeG[T]
	less btree.LessFunc[T]
}

// NewOrdered returns an empty set ordered by less.
func NewOrdered[T any](less func(a, b T) bool) *Ordered[T] {
	return &Ordered[T]{t: btree.NewG(degree, less), less: less}
}

// NewSortedOrdered returns the set of sorted, which must be in strictly
// increasing order by less, with its nodes filled (internal/btree's
// NewSortedG): half the nodes of one built by inserting them, and no
// search per item. sorted becomes the set's (its leaves are windows of
// it): the caller must not touch it afterwards.
func NewSortedOrdered[T any](less func(a, b T) bool, sorted []T) *Ordered[T] {
	return &Ordered[T]{t: btree.NewSortedG(degree, less, sorted), less: less}
}

// Len is the number of items.
func (o *Ordered[T]) Len() int { return o.t.Len() }

// Get returns the item equal to key.
func (o *Ordered[T]) Get(key T) (T, bool) { return o.t.Get(key) }

// Put inserts or replaces item and returns the one it replaced.
func (o *Ordered[T]) Put(item T) (T, bool) { return o.t.ReplaceOrInsert(item) }

// Delete removes the item equal to key.
func (o *Ordered[T]) Delete(key T) (T, bool) { return o.t.Delete(key) }

// Min returns the smallest item.
func (o *Ordered[T]) Min() (T, bool) { return o.t.Min() }

// Clone returns an O(1) copy-on-write snapshot.
func (o *Ordered[T]) Clone() *Ordered[T] { return &Ordered[T]{t: o.t.Clone(), less: o.less} }

// Ascend calls fn for every item ≥ from in order until fn returns false.
func (o *Ordered[T]) Ascend(from T, fn func(T) bool) { o.t.AscendGreaterOrEqual(from, fn) }

// AscendAll calls fn for every item in order until fn returns false.
func (o *Ordered[T]) AscendAll(fn func(T) bool) { o.t.Ascend(fn) }

// AscendRange calls fn for items in [from, to) until fn returns false.
func (o *Ordered[T]) AscendRange(from, to T, fn func(T) bool) { o.t.AscendRange(from, to, fn) }

// NextAfter appends to dst up to n items that follow cursor in order,
// wrapping around to the smallest item, without visiting any item twice.
// hasCursor=false starts at the smallest item. It is how bounded batches
// walk a large set fairly: the caller keeps the last item returned as the
// next cursor, so every item is visited once every ⌈Len/n⌉ calls.
func (o *Ordered[T]) NextAfter(dst []T, cursor T, hasCursor bool, n int) []T {
	if n <= 0 || o.t.Len() == 0 {
		return dst
	}
	if n > o.t.Len() {
		n = o.t.Len()
	}
	start := len(dst)
	if !hasCursor {
		o.t.Ascend(func(it T) bool {
			dst = append(dst, it)
			return len(dst)-start < n
		})
		return dst
	}
	o.t.AscendGreaterOrEqual(cursor, func(it T) bool {
		if !o.less(cursor, it) {
			return true // skip the cursor itself
		}
		dst = append(dst, it)
		return len(dst)-start < n
	})
	if len(dst)-start < n {
		o.t.AscendLessThan(cursor, func(it T) bool {
			dst = append(dst, it)
			return len(dst)-start < n
		})
		if len(dst)-start < n {
			// The cursor itself, if still present, comes last in the round.
			if it, ok := o.t.Get(cursor); ok {
				dst = append(dst, it)
			}
		}
	}
	return dst
}

// Ceil returns the smallest item not below key (internal/btree's Ceil).
func (o *Ordered[T]) Ceil(key T) (T, bool) { return o.t.Ceil(key) }
