package engine

import (
	"bytes"
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idemdb/idem/store"
)

// TestReplayBatchSort_OrdersAsTheKeysBytesThenLogOrder: keys that share
// long prefixes — past the first 24 bytes and the next 24, ending in
// zero bytes that a head's padding looks like, shorter and longer than a
// head — sort as their bytes do, each key's ops in log order, as a stable
// sort by bytes.Compare puts them.
func TestReplayBatchSort_OrdersAsTheKeysBytesThenLogOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t), 41))
	prefixes := []string{"", "tbl/v1/f050d77e71a7bead/", "tbl/v1/f050d77e71a7bead/3/d72lgcbux-0-92", "ab"}
	for round := range 200 {
		var b replayBatch
		for range 1 + rng.IntN(300) {
			key := []byte(prefixes[rng.IntN(len(prefixes))])
			for range rng.IntN(30) {
				key = append(key, "\x00\x01ab"[rng.IntN(4)])
			}
			if len(key) == 0 {
				key = []byte{0}
			}
			b.add(store.Version(len(b.ops)+1), []store.Op{{Key: key, Value: []byte("v")}})
		}
		want := slices.Clone(b.order)
		slices.SortStableFunc(want, func(x, y replayKey) int {
			return bytes.Compare(b.ops[x.seq].op.Key, b.ops[y.seq].op.Key)
		})
		b.sort()
		for i := range want {
			if b.order[i].seq != want[i].seq {
				t.Fatalf("round %d: position %d holds op %d (key %q), want op %d (key %q)", round, i,
					b.order[i].seq, b.ops[b.order[i].seq].op.Key, want[i].seq, b.ops[want[i].seq].op.Key)
			}
		}
		for i := 1; i < len(b.order); i++ {
			x, y := b.order[i-1], b.order[i]
			if bytes.Equal(b.ops[x.seq].op.Key, b.ops[y.seq].op.Key) && (x.head != y.head || cmp.Compare(x.seq, y.seq) >= 0) {
				t.Fatalf("round %d: ops %d and %d of one key: heads %v %v", round, x.seq, y.seq, x.head, y.head)
			}
		}
	}
}

// TestSortReplayKeys_IsAStableSortByHead: the radix sort leaves keys as a
// stable sort by head leaves them — over batches whose heads differ in
// one byte or in many, share long prefixes, repeat hundreds of times
// (runs of equal heads longer than an insertion sort's), or are all
// equal.
func TestSortReplayKeys_IsAStableSortByHead(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t), 38))
	for round := range 300 {
		n := rng.IntN(5000)
		distinct := 1 + rng.IntN(1+rng.IntN(n+1)) // from all equal to all different
		pool := make([][headWords]uint64, distinct)
		for i := range pool {
			for w := range pool[i] {
				switch rng.IntN(3) {
				case 0: // a word every head shares
					pool[i][w] = 0x7263_7074_2f76_312f
				case 1: // differing in its last byte only
					pool[i][w] = 0x6578_702f_7631_2f00 | uint64(rng.IntN(4))
				default:
					pool[i][w] = rng.Uint64()
				}
			}
		}
		keys := make([]replayKey, n)
		for i := range keys {
			keys[i] = replayKey{head: pool[rng.IntN(distinct)], seq: i}
		}
		want := slices.Clone(keys)
		slices.SortStableFunc(want, compareReplayKeys)
		sortReplayKeys(keys, make([]replayKey, n))
		if !slices.Equal(keys, want) {
			t.Fatalf("round %d (%d keys, %d heads): the radix sort's order differs from a stable sort by head", round, n, distinct)
		}
	}
}
