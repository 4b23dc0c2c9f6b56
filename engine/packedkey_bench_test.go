package engine

import (
	"context"
	"encoding/hex"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/idemdb/idem/store"
)

// BenchmarkGet_ReopenedReceipts reads receipts' keys (rcpt/v1/<32 hex>)
// from a reopened store of 200 000, its items loaded from the checkpoint's
// image: the lookup of a replayed request, with packed items in the tree
// and a raw probe.
func BenchmarkGet_ReopenedReceipts(b *testing.B) {
	dir := b.TempDir()
	db, err := Open(dir, Options{CheckpointLogBytes: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const keys = 200_000
	r := rand.New(rand.NewPCG(1, 2))
	all := make([][]byte, keys)
	value := make([]byte, 64)
	for lo := 0; lo < keys; lo += 1000 {
		batch := new(store.Batch)
		for k := lo; k < lo+1000; k++ {
			var id [16]byte
			for i := range id {
				id[i] = byte(r.Uint32())
			}
			all[k] = []byte("rcpt/v1/" + hex.EncodeToString(id[:]))
			batch.Put(all[k], value)
		}
		if _, err := db.Apply(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Checkpoint(); err != nil {
		b.Fatal(err)
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	if db, err = Open(dir, Options{CheckpointLogBytes: -1, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := db.Get(ctx, all[i%keys]); err != nil {
			b.Fatal(err)
		}
	}
}
