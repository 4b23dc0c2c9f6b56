package index

import (
	"encoding/hex"
	"math/rand/v2"
	"testing"
)

// receiptItems are n receipts' items (rcpt/v1/<32 hex>, a 64-byte value)
// as a checkpoint's image holds them, and their raw keys shuffled.
func receiptItems(n int) ([]KV, [][]byte) {
	r := rand.New(rand.NewPCG(3, 4))
	items, keys := make([]KV, n), make([][]byte, n)
	for i := range items {
		var id [16]byte
		for j := range id {
			id[j] = byte(r.Uint32())
		}
		keys[i] = []byte("rcpt/v1/" + hex.EncodeToString(id[:]))
		items[i] = imageItem(keys[i], make([]byte, 64), uint64(i+1))
	}
	return items, keys
}

// BenchmarkKeySpace_Get looks receipts up by raw key in a key space of
// 200 000 built from their image items.
func BenchmarkKeySpace_Get(b *testing.B) {
	items, keys := receiptItems(200_000)
	ks := NewKeySpace()
	for _, it := range items {
		ks.Put(it)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, ok := ks.Get(Probe(keys[i%len(keys)])); !ok {
			b.Fatal("not found")
		}
	}
}

// BenchmarkKeySpace_Put inserts receipts' image items into a key space,
// starting over every 200 000.
func BenchmarkKeySpace_Put(b *testing.B) {
	items, _ := receiptItems(200_000)
	ks := NewKeySpace()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%len(items) == 0 && i > 0 {
			b.StopTimer()
			ks = NewKeySpace()
			b.StartTimer()
		}
		ks.Put(items[i%len(items)])
	}
}
