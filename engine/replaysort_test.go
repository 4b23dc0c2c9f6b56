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
