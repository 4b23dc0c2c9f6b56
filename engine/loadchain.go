package engine

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"slices"
	"sync"

	"github.com/idemdb/idem/index"
)

// Loading a checkpoint chain as one sorted build (recover.go).
//
// A chain is a base (its parts in key order) and deltas (each in key order,
// newest last). Instead of inserting each record into the tree — a descent
// with a binary search per record, and nodes left half full — the base's
// records and every delta's are merged in one pass, newest winning, and the
// tree is built from the result at once with full nodes
// (index.NewSortedKeySpace).
//
// The deltas (up to CheckpointDeltasMax) are merged through a loser tree,
// log2(deltas) comparisons per record, and its winner meets the base's head,
// one more: the base, most of a chain rebased not long ago, costs about one
// comparison per record. Nothing is merged into a run of its own first — a
// pairwise merge would allocate and copy once per level, memory that a
// fresh process pays for in page faults and the collector in scanning. The
// key space is cut into as many ranges as there are processors, at keys
// drawn from the largest run, and the ranges are merged at once, each into
// its own stretch of the output. The merge also proves the order: every
// record it emits must follow the one before. A run out of order (no
// checkpoint writer makes one) makes the build fall back to applying
// records one by one, which the order does not matter to. Memory: the
// records of the chain once more, as 24-byte items, until the build is done.

// loadRun is the records of one link of a chain, in key order.
type loadRun struct {
	kv    []index.KV
	tombs []uint64 // bit i set: kv[i] is a tombstone for its key (nil: none)
}

func (r *loadRun) add(kv index.KV, tombstone bool) {
	if tombstone {
		i := len(r.kv)
		for len(r.tombs) <= i>>6 {
			r.tombs = append(r.tombs, 0)
		}
		r.tombs[i>>6] |= 1 << (i & 63)
	}
	r.kv = append(r.kv, kv)
}

func (r *loadRun) tombstone(i int) bool {
	return i>>6 < len(r.tombs) && r.tombs[i>>6]&(1<<(i&63)) != 0
}

// chainLoad is a chain being loaded: the base's records, and the deltas'
// in order.
type chainLoad struct {
	base   []index.KV
	deltas []loadRun
	// layout, if set, holds the base instead of base, laid out for an
	// in-place merge (loadlayout.go).
	layout *baseLayout
	// room is the spare capacity the merged records are given for the
	// keys the replay adds (replayRoom).
	room int
	// baseTallies, if set, are base's parts' tallies, from their tally
	// blocks (tallyblock.go).
	baseTallies []itemTally
}

// loadRangesMax bounds the ranges one build merges at once, and
// loadRangeMin is the fewest records a range is cut for.
const (
	loadRangesMax = 8
	loadRangeMin  = 4096
)

// build returns the tree the chain holds, its live-bytes estimate and the
// value log's live bytes by segment.
func (l *chainLoad) build() (*index.Ordered[index.KV], int64, map[uint32]int64) {
	items, tree, live, vlive := l.buildSorted()
	if tree == nil {
		tree = index.NewSortedKeySpace(items)
	}
	return tree, live, vlive
}

// buildSorted is build leaving a chain that was merged as its records in
// key order, tree nil: an open's replay then applies the log over them
// before they become the tree (replayoverlay.go). A chain built on its
// base (loadbase.go) comes back as a tree, items nil.
func (l *chainLoad) buildSorted() ([]index.KV, *index.Ordered[index.KV], int64, map[uint32]int64) {
	if l.layout != nil {
		items, live, vlive := l.layout.merge(l.deltas)
		l.layout = nil
		return items, nil, live, vlive
	}
	records := len(l.base)
	for _, d := range l.deltas {
		records += len(d.kv)
	}
	return l.buildSortedIn(max(1, min(runtime.GOMAXPROCS(0), loadRangesMax, records/loadRangeMin)))
}

func (l *chainLoad) buildIn(ranges int) (*index.Ordered[index.KV], int64, map[uint32]int64) {
	items, tree, live, vlive := l.buildSortedIn(ranges)
	if tree == nil {
		tree = index.NewSortedKeySpace(items)
	}
	return tree, live, vlive
}

func (l *chainLoad) buildSortedIn(ranges int) ([]index.KV, *index.Ordered[index.KV], int64, map[uint32]int64) {
	if l.smallDeltas() {
		if tree, live, vlive, ok := l.buildOnBase(ranges); ok {
			return nil, tree, live, vlive
		}
	}
	runs := make([]loadRun, 0, 1+len(l.deltas))
	runs = append(runs, loadRun{kv: l.base})
	runs = append(runs, l.deltas...)
	items, live, vlive, ok := mergeRanges(runs, ranges, l.room)
	if !ok {
		items = l.byInserts()
		live, vlive = itemStats(items)
	}
	return items, nil, live, vlive
}

// itemStats sums items' live bytes and the value log's live bytes by
// segment, a stretch of the items to each processor: on one, the pass
// over 25 M items took 0.4 s of an open at 10 M receipts (a map update per
// record in the value log).
func itemStats(items []index.KV) (int64, map[uint32]int64) {
	n := max(1, min(runtime.GOMAXPROCS(0), len(items)/itemStatsMin))
	lives := make([]int64, n)
	vlives := make([]map[uint32]int64, n)
	var wg sync.WaitGroup
	for j := range n {
		wg.Go(func() { lives[j], vlives[j] = itemStatsOf(items[j*len(items)/n : (j+1)*len(items)/n]) })
	}
	wg.Wait()
	live, vlive := lives[0], vlives[0]
	for j := 1; j < n; j++ {
		live += lives[j]
		for seg, b := range vlives[j] {
			vlive[seg] += b
		}
	}
	return live, vlive
}

// itemStatsMin is the fewest items itemStats gives a processor of its own.
const itemStatsMin = 1 << 16

// itemStatsOf sums items' live bytes and the value log's live bytes by
// segment (itemTally).
func itemStatsOf(items []index.KV) (int64, map[uint32]int64) {
	var t itemTally
	for _, it := range items {
		t.add(it)
	}
	return tallySums([]itemTally{t})
}

// itemStatsSegsMax bounds the segments itemStatsOf sums in its slice.
const itemStatsSegsMax = 1 << 16

// byInserts applies the chain record by record, as an open did before the
// sorted build: a later record wins. It returns the result in key order.
func (l *chainLoad) byInserts() []index.KV {
	tree := index.NewKeySpace()
	for _, it := range l.base {
		tree.Put(it)
	}
	for _, d := range l.deltas {
		for i, kv := range d.kv {
			if d.tombstone(i) {
				tree.Delete(kv)
			} else {
				tree.Put(kv)
			}
		}
	}
	out := make([]index.KV, 0, tree.Len())
	tree.AscendAll(func(it index.KV) bool { out = append(out, it); return true })
	return out
}

// mergeRanges merges runs (oldest first) in up to ranges pieces of the key
// space at once, into an array with room spare capacity after the records.
// It returns the merged records' live bytes and the value log's by
// segment, and false if a run is out of order.
func mergeRanges(runs []loadRun, ranges, room int) ([]index.KV, int64, map[uint32]int64, bool) {
	total := 0
	for _, r := range runs {
		total += len(r.kv)
	}
	cuts := splitKeys(runs, ranges)
	// bounds[j][r] is where range j starts in run r.
	bounds := make([][]int, len(cuts)+2)
	bounds[0] = make([]int, len(runs))
	for j, cut := range cuts {
		bounds[j+1] = make([]int, len(runs))
		for r, run := range runs {
			bounds[j+1][r], _ = slices.BinarySearchFunc(run.kv, index.Probe(cut), index.KV.CompareKey)
		}
	}
	last := make([]int, len(runs))
	for r, run := range runs {
		last[r] = len(run.kv)
	}
	bounds[len(cuts)+1] = last
	// Range j writes from starts[j], the count of every run's records
	// before it: the ranges before it write no more than that.
	starts := make([]int, len(cuts)+1)
	for j := range starts {
		for r := range runs {
			starts[j] += bounds[j][r]
		}
	}
	out := make([]index.KV, total, total+room)
	n := make([]int, len(cuts)+1)
	ok := make([]bool, len(cuts)+1)
	tallies := make([]itemTally, len(cuts)+1)
	var wg sync.WaitGroup
	for j := range starts {
		wg.Go(func() { n[j], ok[j] = mergeRange(runs, bounds[j], bounds[j+1], out[starts[j]:], &tallies[j], false) })
	}
	wg.Wait()
	w := 0
	for j := range n {
		if !ok[j] {
			return nil, 0, nil, false
		}
		w += copy(out[w:], out[starts[j]:starts[j]+n[j]])
	}
	clear(out[w:]) // no stale pointers for the collector to keep
	live, vlive := tallySums(tallies)
	return out[:w], live, vlive, true
}

// splitKeys returns up to ranges-1 increasing keys that cut the largest run
// into equal pieces.
func splitKeys(runs []loadRun, ranges int) [][]byte {
	largest := 0
	for r := range runs {
		if len(runs[r].kv) > len(runs[largest].kv) {
			largest = r
		}
	}
	kv := runs[largest].kv
	if len(kv) < ranges {
		return nil
	}
	var cuts [][]byte
	for j := 1; j < ranges; j++ {
		k := kv[j*len(kv)/ranges].Key()
		if len(k) == 0 || (len(cuts) > 0 && bytes.Compare(k, cuts[len(cuts)-1]) <= 0) {
			continue // a tiny run, or a run out of order: fewer ranges
		}
		cuts = append(cuts, k)
	}
	return cuts
}

// mergeRange merges one range of the runs (the base first) into dst: for
// each key the newest run's record, in key order, a tombstone dropping its
// key. It returns how many it wrote, and false if a run is out of order. The
// deltas go through one loser tree, log2(deltas) comparisons per record;
// its winner then meets the base's head, one more: a base far larger than
// its deltas — a store rebased not long ago — costs about one comparison
// per record, and nothing is merged into a run of its own first. Each
// record written is tallied in tally.
//
// With decoded set, the base is one whose decoder proved it in strictly
// increasing key order and tallied it already (loadlayout.go): its records
// before the deltas' next key are then copied as a block, found by a
// galloping search (baseBelow), neither read nor tallied one by one, and
// tally only adds the deltas' records and takes back the base's they hide.
// In an open of the store a 100-kill crash loop left (a base of 8.1 M
// records under 18 deltas of 5.9 M), the merge's share of the open's CPU
// fell from 36 % to 27 % (docs/engine.md, "What an open's time is made of").
func mergeRange(runs []loadRun, from, to []int, dst []index.KV, tally *itemTally, decoded bool) (int, bool) {
	m := rangeMerge{base: runs[0].kv[from[0]:to[0]], dst: dst, tally: tally, decoded: decoded}
	if len(runs) > 1 {
		m.t = newLoserTree(runs[1:], from[1:], to[1:])
	}
	if len(m.base) > 0 {
		m.bh = headOfKV(m.base[0])
	}
	for {
		w := -1
		if m.t != nil {
			w = m.t.winner()
		}
		switch {
		case w < 0 && m.bh.done():
			return m.written, true
		case w < 0 || (!m.bh.done() && compareHeads(&m.bh, &m.t.heads[w]) < 0):
			// The base's record; on a key a delta holds too, the delta's
			// comes first and the base's is passed over in emit.
			h, kv := m.bh, m.base[m.bi]
			m.bi++
			if m.bh = (head{}); m.bi < len(m.base) {
				m.bh = headOfKV(m.base[m.bi])
			}
			if !m.emit(h, kv, false, fromBase) {
				return m.written, false
			}
			if m.decoded && m.prevRun == fromBase {
				m.copyBaseBelow(w)
			}
		default:
			pos := m.t.pos[w]
			h, kv, tombstone := m.t.heads[w], runs[1+w].kv[pos], runs[1+w].tombstone(pos)
			m.t.advance(w)
			if !m.emit(h, kv, tombstone, w) {
				return m.written, false
			}
		}
	}
}

// fromBase is the base's run in a rangeMerge (the deltas' are 0, 1, …).
const fromBase = -1

// rangeMerge is one mergeRange under way.
type rangeMerge struct {
	base    []index.KV
	bi      int  // the base's next record
	bh      head // its head; done when the base is
	t       *loserTree
	dst     []index.KV
	written int
	prev    head // the key last decided
	prevRun int
	tally   *itemTally
	decoded bool
}

// emit decides kv, run's record, with head h: written, passed over as an
// older record of the key just decided, or dropped as a tombstone. It
// returns false if h does not follow the key last decided.
func (m *rangeMerge) emit(h head, kv index.KV, tombstone bool, run int) bool {
	if !m.prev.done() {
		switch c := compareHeads(&h, &m.prev); {
		case c < 0, c == 0 && run == m.prevRun:
			return false
		case c == 0: // an older record of the key just decided
			if m.decoded && run == fromBase {
				m.tally.sub(kv)
			}
			return true
		}
	}
	m.prev, m.prevRun = h, run
	if tombstone {
		return true
	}
	m.dst[m.written] = kv
	m.written++
	if !m.decoded || run != fromBase {
		m.tally.add(kv)
	}
	return true
}

// copyBaseBelow copies the decoded base's records before the head of the
// deltas' winner w (all of them when w < 0) to dst as one block. They follow
// the record just written, which the decoder proved, so only the block's
// last becomes the key last decided.
func (m *rangeMerge) copyBaseBelow(w int) {
	n := len(m.base) - m.bi
	if w >= 0 {
		n = baseBelow(m.base[m.bi:], &m.t.heads[w])
	}
	if n == 0 {
		return
	}
	if &m.dst[m.written] != &m.base[m.bi] { // in place, the block may not have to move
		copy(m.dst[m.written:], m.base[m.bi:m.bi+n])
	}
	m.written += n
	m.bi += n
	m.prev = headOfKV(m.base[m.bi-1])
	if m.bh = (head{}); m.bi < len(m.base) {
		m.bh = headOfKV(m.base[m.bi])
	}
}

// baseBelow is how many of base's first records have keys before h's,
// base being in strictly increasing key order: a galloping search, about
// 2·log2(n) comparisons for n records, the first few as a linear scan
// would make them.
func baseBelow(base []index.KV, h *head) int {
	below := func(i int) bool {
		bh := headOfKV(base[i])
		return compareHeads(&bh, h) < 0
	}
	lo, hi := 0, 1 // base[:lo] are below
	for hi <= len(base) && below(hi-1) {
		lo, hi = hi, 2*hi
	}
	hi = min(hi-1, len(base)) // base[hi], if any, is not below
	i, _ := slices.BinarySearchFunc(base[lo:hi], true, func(kv index.KV, _ bool) int {
		if bh := headOfKV(kv); compareHeads(&bh, h) < 0 {
			return -1
		}
		return 1
	})
	return lo + i
}

// loserTree is a tournament over the runs' heads: each inner node holds the
// run that lost there, node 0 the overall winner — the least key, the newest
// run among equal keys. Replacing the winner's head replays one path.
type loserTree struct {
	runs  []loadRun
	pos   []int // each run's head
	end   []int
	heads []head
	node  []int // node[0]: winner; node[i], i ≥ 1: loser at inner node i
}

// head is a run's head item and its key's first headWords·8 raw bytes as
// big-endian words, zero-padded: words that differ order the keys as their
// bytes do (a key's zero padding sorts before any byte a longer key has
// there), so most comparisons are of integers, and only keys that share
// their first 24 bytes are compared by CompareKey. (Receipts' keys differ
// in their second word, retention entries' in their third.)
type head struct {
	w  [headWords]uint64
	kv index.KV // zero: the run is done
}

const headWords = 3

// done reports whether the run is done (keys are never empty).
func (h *head) done() bool { return h.kv == index.KV{} }

// headOf is the head of a raw key (the replay's sort takes its words).
func headOf(key []byte) head { return headOfKV(index.Probe(key)) }

func headOfKV(kv index.KV) head {
	h := head{kv: kv}
	var pad [8 * headWords]byte
	kv.CopyKey(pad[:])
	for i := range h.w {
		h.w[i] = binary.BigEndian.Uint64(pad[8*i:])
	}
	return h
}

func newLoserTree(runs []loadRun, from, to []int) *loserTree {
	t := &loserTree{runs: runs, pos: slices.Clone(from), end: to, heads: make([]head, len(runs)), node: make([]int, len(runs))}
	for r := range runs {
		t.load(r)
	}
	t.node[0] = t.play(1)
	return t
}

// load sets run r's head from its position.
func (t *loserTree) load(r int) {
	if t.pos[r] == t.end[r] {
		t.heads[r] = head{}
		return
	}
	t.heads[r] = headOfKV(t.runs[r].kv[t.pos[r]])
}

// play fills the subtree under inner node i and returns its winner (leaves
// are nodes len(runs)…2·len(runs)-1).
func (t *loserTree) play(i int) int {
	k := len(t.runs)
	if i >= k {
		return i - k
	}
	a, b := t.play(2*i), t.play(2*i+1)
	if t.before(a, b) {
		t.node[i] = b
		return a
	}
	t.node[i] = a
	return b
}

// before reports whether run a's head comes before run b's: a finished run
// comes last, equal keys go newest first.
func (t *loserTree) before(a, b int) bool {
	ha, hb := &t.heads[a], &t.heads[b]
	if hb.done() {
		return !ha.done()
	}
	if ha.done() {
		return false
	}
	c := compareHeads(ha, hb)
	return c < 0 || (c == 0 && a > b)
}

// compareHeads orders two heads' keys, as bytes.Compare orders their raw
// bytes.
func compareHeads(a, b *head) int {
	for i := range a.w {
		if a.w[i] != b.w[i] {
			if a.w[i] < b.w[i] {
				return -1
			}
			return 1
		}
	}
	return a.kv.CompareKey(b.kv)
}

// winner is the run holding the next record, or -1 when every run is done.
func (t *loserTree) winner() int {
	w := t.node[0]
	if t.heads[w].done() {
		return -1
	}
	return w
}

// advance moves run w past its head and replays w's path to the root.
func (t *loserTree) advance(w int) {
	t.pos[w]++
	t.load(w)
	for i := (w + len(t.runs)) / 2; i > 0; i /= 2 {
		if t.before(t.node[i], w) {
			t.node[i], w = w, t.node[i]
		}
	}
	t.node[0] = w
}
