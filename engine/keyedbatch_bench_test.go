package engine

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// keyedTree is a key space as receipts:keyed leaves one: receipts (packed)
// at random keys, their expiry entries, and ten documents each, in four
// shards' runs.
func keyedTree(receipts int, rng *rand.Rand) *index.Ordered[index.KV] {
	var items []index.KV
	for n := range receipts {
		for _, op := range keyedOps(uint64(n), rng) {
			stored, packed := index.AppendStoredKey(nil, op.Key)
			buf := index.AppendKV(nil, stored, op.Value, uint64(n+1))
			kv := index.PackedKV(buf, len(stored), len(op.Value))
			if packed {
				kv = kv.WithPackedKey()
			}
			items = append(items, kv)
		}
	}
	slices.SortFunc(items, func(a, b index.KV) int { return a.CompareKey(b) })
	return index.NewSortedKeySpace(items)
}

// keyedOps are the writes of keyed request n: its receipt, its expiry
// entry and ten new documents (twopc/once.go, receipt/create_terminal.go),
// in the caller's order.
func keyedOps(n uint64, rng *rand.Rand) []store.Op {
	var id [16]byte
	for i := range id {
		id[i] = byte(rng.Uint32())
	}
	hexID := hex.EncodeToString(id[:])
	ops := []store.Op{
		{Key: []byte("rcpt/v1/" + hexID), Value: make([]byte, 242)},
		{Key: []byte(fmt.Sprintf("exp/v1/%020d/%s", 1_700_000_000_000+n, hexID)), Value: []byte{}},
	}
	for j := range 10 {
		key := fmt.Sprintf("tbl/v1/764e21b559525d9f/%d/d%d-%d", j%4, n, j)
		ops = append(ops, store.Op{Key: []byte(key), Value: make([]byte, 186)})
	}
	return ops
}

// BenchmarkPublishKeyedBatch publishes keyed requests' batches into a key
// space of 50 000 requests' keys as onDurable does (applyToTree), each
// encoded beforehand as apply encodes it (encodeLinks, not timed): the
// tree work of a keyed request after its fsync.
func BenchmarkPublishKeyedBatch(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	db := bareDB()
	db.tree = keyedTree(50_000, rng)
	live := make([][]store.Op, b.N)
	for i := range live {
		var links [1]chainLink
		batch := &store.Batch{Ops: keyedOps(uint64(50_000+i), rng)}
		if err := db.encodeLinks([]*store.Batch{batch}, links[:]); err != nil {
			b.Fatal(err)
		}
		live[i] = links[0].live
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for i, ops := range live {
		db.applyToTree(store.Version(i+1), ops)
	}
	b.StopTimer()
	// CPU beside wall time: on a loaded machine the wall time is mostly the
	// neighbours'.
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
	if got, want := db.tree.Len(), 12*(50_000+b.N); got != want {
		b.Fatalf("%d keys in the tree, want %d", got, want)
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// keyedConds are the conditions of keyed request n (the dump of one in
// receipt's tests, issue 41): its transaction's record and decision, its
// receipt and tombstone absent, and per shard the table's metadata at its
// version and each document's intent absent.
func keyedConds(n uint64, rng *rand.Rand) []store.Condition {
	var id [16]byte
	for i := range id {
		id[i] = byte(rng.Uint32())
	}
	hexID := hex.EncodeToString(id[:])
	absent := func(k string) store.Condition { return store.Condition{Key: []byte(k), Kind: store.MustBeAbsent} }
	conds := []store.Condition{absent("txn/v1/rec/" + hexID), absent("txn/v1/dec/" + hexID),
		absent("rcpt/v1/" + hexID), absent("tomb/v1/" + string(id[:]))}
	for shard := range 4 {
		conds = append(conds, store.Condition{Key: []byte(keyedMeta), Kind: store.MustBeAtVersion, Version: 1})
		for j := shard; j < 10; j += 4 {
			conds = append(conds, absent(fmt.Sprintf("intent/v1/764e21b559525d9f/%d/d%d-%d", shard, n, j)))
		}
	}
	return conds
}

const keyedMeta = "meta/v1/tenant/616c696365/bench"

// BenchmarkCheckKeyedConds checks keyed requests' 18 conditions (all hold)
// against a key space of 50 000 requests' keys, as apply does under mu
// (checkConds).
func BenchmarkCheckKeyedConds(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	db := bareDB()
	db.tree = keyedTree(50_000, rng)
	db.tree.Put(index.PackedKV(index.AppendKV(nil, []byte(keyedMeta), nil, 1), len(keyedMeta), 0))
	conds := make([][]store.Condition, b.N)
	for i := range conds {
		conds[i] = keyedConds(uint64(50_000+i), rng)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for _, c := range conds {
		if _, _, err := db.checkConds(c, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}
