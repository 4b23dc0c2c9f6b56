package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// BenchmarkReplayApply applies a replayed tail — 64 Ki puts and deletes
// of random keys, half of them new — to a tree of 1 M keys built as an
// open builds it, in log order (as replay did) and in the replay's sorted
// batches: the tree work of replay, without the log's reading.
func BenchmarkReplayApply(b *testing.B) {
	const stored, tail = 1 << 20, replayBatchOps
	base := make([]index.KV, stored)
	for i := range base {
		base[i] = chainKV(fmt.Sprintf("rcpt/v1/%016x", uint64(i)*2), 1)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ops := make([]store.Op, tail)
	for i := range ops {
		key := []byte(fmt.Sprintf("rcpt/v1/%016x", rng.Uint64N(2*stored)))
		if i%3 == 0 {
			ops[i] = store.Op{Key: key, Delete: true}
		} else {
			ops[i] = ownOps([]store.Op{{Key: key, Value: make([]byte, 150)}})[0]
		}
	}
	for _, sorted := range []bool{false, true} {
		b.Run(fmt.Sprintf("sorted=%v", sorted), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				db := bareDB()
				db.tree = index.NewSortedKeySpace(append([]index.KV(nil), base...))
				b.StartTimer()
				var batch replayBatch
				for i, op := range ops {
					v := store.Version(i + 2)
					if !sorted {
						db.applyToTree(v, []store.Op{op})
					} else if batch.add(v, []store.Op{op}) {
						batch.flush(db)
					}
				}
				batch.flush(db)
			}
		})
	}
}

// BenchmarkReplayBatchSort sorts a full batch of a keyed request's three
// keys — receipt (a random id), expiry (a deadline, then the id) and
// document — by head, as the comparison sort did and as the radix sort
// does (replaysort.go).
func BenchmarkReplayBatchSort(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 8))
	keys := make([]replayKey, 0, replayBatchOps)
	for i := 0; len(keys) < replayBatchOps; i++ {
		id := fmt.Sprintf("%016x", rng.Uint64())
		for _, k := range []string{"rcpt/v1/" + id, fmt.Sprintf("exp/v1/%020d/%s", 1_765_000_000_000+i, id), fmt.Sprintf("tbl/v1/t/doc/%d", i)} {
			keys = append(keys, replayKey{head: headOf([]byte(k)).w, seq: len(keys)})
		}
	}
	keys = keys[:replayBatchOps]
	work, scratch := make([]replayKey, len(keys)), make([]replayKey, len(keys))
	b.Run("comparison", func(b *testing.B) {
		for b.Loop() {
			copy(work, keys)
			slices.SortFunc(work, compareReplayKeys)
		}
	})
	b.Run("radix", func(b *testing.B) {
		for b.Loop() {
			copy(work, keys)
			sortReplayKeys(work, scratch)
		}
	})
}
