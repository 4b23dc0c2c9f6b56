package btree

// FingerG remembers the leaf the last ReplaceOrInsertAt put its item in,
// and the separator that bounds that leaf on the right, so that the next
// item of an ascending run can go straight into the leaf without a descent
// from the root: a batch's sorted puts, most of which share a leaf with the
// one before (docs/design.md §2; engine/publish.go). The zero FingerG is
// empty; a finger is only valid on the tree that filled it.
type FingerG[T any] struct {
	leaf  *node[T]
	last  T // the item put last, at leaf.items[idx]
	idx   int
	hi    T // leaf's right separator, if hasHi
	hasHi bool
}

// ReplaceOrInsertAt is ReplaceOrInsert, starting at f's leaf when item
// belongs there: not below the item f put last, below the leaf's right
// separator, in a leaf with room that this tree still owns (a Clone since
// makes it shared). Anything else descends from the root as ReplaceOrInsert
// does and refills f. Any other write to the tree between two calls (a
// Delete, which can merge or free the leaf; a ReplaceOrInsert or another
// finger's, which can split it and leave f's bound too wide) must be
// followed by f.Reset.
func (t *BTreeG[T]) ReplaceOrInsertAt(f *FingerG[T], item T) (T, bool) {
	less := t.cow.less
	if l := f.leaf; l != nil && l.cow == t.cow && len(l.items) < t.maxItems() &&
		!less(item, f.last) && (!f.hasHi || less(item, f.hi)) {
		i, found := f.idx, !less(f.last, item)
		if !found {
			i, found = l.items.findAfter(i, item, less)
		}
		f.last, f.idx = item, i
		if found {
			out := l.items[i]
			l.items[i] = item
			return out, true
		}
		l.items.insertAt(i, item)
		t.length++
		var zero T
		return zero, false
	}
	f.Reset()
	if t.root == nil || len(t.root.items) >= t.maxItems() {
		return t.ReplaceOrInsert(item) // a new or split root: the next item descends
	}
	t.root = t.root.mutableFor(t.cow)
	out, replaced := t.root.insertFinger(f, item, t.maxItems())
	if !replaced {
		t.length++
	}
	return out, replaced
}

// Reset empties f.
func (f *FingerG[T]) Reset() { *f = FingerG[T]{} }

// insertFinger is node.insert, iterative, noting in f the leaf item went
// into and the nearest right separator above it. An item replaced in an
// inner node leaves f empty.
func (n *node[T]) insertFinger(f *FingerG[T], item T, maxItems int) (_ T, _ bool) {
	less := n.cow.less
	for {
		i, found := n.items.find(item, less)
		if found {
			out := n.items[i]
			n.items[i] = item
			if len(n.children) == 0 {
				f.leaf, f.last, f.idx = n, item, i
			}
			return out, true
		}
		if len(n.children) == 0 {
			n.items.insertAt(i, item)
			f.leaf, f.last, f.idx = n, item, i
			return
		}
		if n.maybeSplitChild(i, maxItems) {
			inTree := n.items[i]
			switch {
			case less(item, inTree):
			case less(inTree, item):
				i++
			default:
				out := n.items[i]
				n.items[i] = item
				f.Reset()
				return out, true
			}
		}
		if i < len(n.items) {
			f.hi, f.hasHi = n.items[i], true
		}
		n = n.mutableChild(i)
	}
}

// findAfter is find for an item above s[i]: the next item first — the
// position of a run's next put among keys nobody else wrote between them,
// one compare of a key the descent did not bring into cache — then a
// binary search of the rest.
func (s items[T]) findAfter(i int, item T, less func(T, T) bool) (int, bool) {
	j := i + 1
	if j == len(s) || less(item, s[j]) {
		return j, false
	}
	if !less(s[j], item) {
		return j, true
	}
	k, found := s[j+1:].find(item, less)
	return j + 1 + k, found
}
