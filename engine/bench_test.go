package engine

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemdb/idem/store"
)

// BenchmarkApply is one durable single-key create per call, many in flight,
// so the WAL gathers groups as under load (go test -bench, benchstat; the
// disk-floor comparison is cmd/bench's engine suite).
func BenchmarkApply(b *testing.B) {
	db, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	value := make([]byte, 200)
	var seq atomic.Uint64
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			key := []byte("k" + strconv.FormatUint(seq.Add(1), 10))
			if _, err := db.Apply(ctx, new(store.Batch).Absent(key).Put(key, value)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGet reads from a store of 100 000 keys: the snapshot-free read
// path of every receipt lookup.
func BenchmarkGet(b *testing.B) {
	db, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	ctx := context.Background()
	const keys = 100_000
	value := make([]byte, 200)
	for lo := 0; lo < keys; lo += 1000 {
		batch := new(store.Batch)
		for k := lo; k < lo+1000; k++ {
			batch.Put([]byte("k"+strconv.Itoa(k)), value)
		}
		if _, err := db.Apply(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := db.Get(ctx, []byte("k"+strconv.Itoa(i%keys))); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen_Replay times an open that replays 20 000 small entries of
// three puts each (a keyed request's), after an empty checkpoint.
func BenchmarkOpen_Replay(b *testing.B) {
	dir := b.TempDir()
	opts := quiet(Options{CheckpointLogBytes: -1})
	db, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	if err := db.Checkpoint(); err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 140)
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < 20_000; i += 16 {
				var batch store.Batch
				for _, ns := range []string{"rcpt/v1/", "exp/v1/", "tbl/v1/b/doc/"} {
					batch.Put(fmt.Appendf(nil, "%s%08d", ns, i), value)
				}
				if _, err := db.Apply(ctx, &batch); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		db, err := Open(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(db.Stats().Recovery.ReplayedBytes)
		b.StopTimer()
		db.Close()
		b.StartTimer()
	}
}
