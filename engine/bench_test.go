package engine

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
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
			if _, err := db.Apply(ctx, new(Batch).Absent(key).Put(key, value)); err != nil {
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
		batch := new(Batch)
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
