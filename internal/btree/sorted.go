package btree

// NewSortedG is Idem's addition to google/btree (PATCH.md): it builds a
// tree of the given degree from items already in strictly increasing
// order, top down, with every node as full as a tree of that height
// allows. Inserting sorted items one by one instead leaves the nodes half
// full (each split leaves its left half behind for good) and costs a
// descent with a binary search per item; here no leaf item is copied at
// all.
//
// sorted becomes the tree's: each leaf is a window of it, its capacity cut
// at its end, so that a leaf that grows reallocates instead of running
// into its neighbour (only separators are copied into inner nodes). The
// caller must not touch sorted afterwards. Most of a tree's items are in
// its leaves, so a build of a checkpoint's millions of items writes no
// second copy of them, memory a fresh process pays for in page faults and
// the collector in scanning. The result is an ordinary tree: every
// operation, Clone included, works on it as on one built by inserts.
func NewSortedG[T any](degree int, less LessFunc[T], sorted []T) *BTreeG[T] {
	t := NewG[T](degree, less)
	if len(sorted) == 0 {
		return t
	}
	height := 1
	for capacityOf(height, t.maxItems()) < len(sorted) {
		height++
	}
	var slab nodeSlab[T]
	t.root = t.buildSorted(sorted, height, &slab)
	t.length = len(sorted)
	return t
}

// capacityOf is the most items a subtree of height h (1: a leaf) holds
// with nodes of at most max items; it saturates instead of overflowing.
func capacityOf(h, max int) int {
	c := max
	for ; h > 1; h-- {
		if c > (1<<62)/(max+1) {
			return 1 << 62
		}
		c = (max+1)*c + max
	}
	return c
}

// buildSorted makes the subtree of height h holding items: the fewest
// children that can hold them, the items spread evenly among them, one
// separator between each two. Even spreading keeps every node at least
// half full — the fewest children means each holds more than half of what
// its height can — so the result obeys the B-tree's minimum.
func (t *BTreeG[T]) buildSorted(sorted []T, h int, slab *nodeSlab[T]) *node[T] {
	n := slab.next(t.cow)
	if h == 1 {
		n.items = items[T](sorted[:len(sorted):len(sorted)])
		return n
	}
	child := capacityOf(h-1, t.maxItems())
	k := (len(sorted) + child + 1) / (child + 1) // ceil((len+1) / (child+1))
	if k < 2 {
		k = 2
	}
	n.items = make(items[T], 0, k-1)
	n.children = make(items[*node[T]], 0, k)
	rest := len(sorted) - (k - 1) // items below the separators
	at := 0
	for i := 0; i < k; i++ {
		size := rest / k
		if i < rest%k {
			size++
		}
		n.children = append(n.children, t.buildSorted(sorted[at:at+size], h-1, slab))
		at += size
		if i < k-1 {
			n.items = append(n.items, sorted[at])
			at++
		}
	}
	return n
}

// nodeSlab hands out a build's nodes from arrays of nodeSlabLen: a
// checkpoint chain's millions of items need a node per 63 of them, and an
// allocation each was most of the build's time (11 M items with the
// collector off: 93–104 ms, 55–66 ms from slabs). A slab stays alive while
// any of its nodes does, so a tree whose every node was copied since
// (copy-on-write after a Clone) may keep one slab per nodeSlabLen nodes it
// was built with, about 1 byte per item at most.
type nodeSlab[T any] struct{ free []node[T] }

const nodeSlabLen = 4096

func (s *nodeSlab[T]) next(cow *copyOnWriteContext[T]) *node[T] {
	if len(s.free) == 0 {
		s.free = make([]node[T], nodeSlabLen)
	}
	n := &s.free[0]
	s.free = s.free[1:]
	n.cow = cow
	return n
}
