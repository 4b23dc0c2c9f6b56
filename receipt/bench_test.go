package receipt_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
)

// These benchmarks profile the library's per-request CPU and allocations
// (go test -bench . -benchmem, compared with benchstat). Throughput against
// the disk's physical floor is cmd/bench's job, not theirs.

// benchDoc is a payment-like document of about 190 bytes, the shape
// cmd/bench uses.
var benchDoc = json.RawMessage(`{"amount":4200,"currency":"usd","customer":"cus_4f3a2b1c9d","status":"succeeded","description":"` +
	strings.Repeat("x", 88) + `"}`)

// benchBatch inserts ten fresh documents named after n.
func benchBatch(n uint64) *table.Batch {
	b := &table.Batch{Inserts: make([]table.Insert, 10)}
	for j := range b.Inserts {
		b.Inserts[j] = table.Insert{ID: "d" + strconv.FormatUint(n, 10) + "-" + strconv.Itoa(j), Doc: benchDoc}
	}
	return b
}

func benchService(b *testing.B) *receipt.Service {
	e := newEnv(b)
	svc := e.open(receipt.Options{})
	createTable(b, svc, "bench")
	return svc
}

// BenchmarkExecuteKeyed is the keyed flow end to end with a new key per
// request: receipt, started, 2PC, terminal envelope. Parallel so the WAL's
// group commit gathers as it does under load.
func BenchmarkExecuteKeyed(b *testing.B) {
	svc := benchService(b)
	var seq atomic.Uint64
	b.SetParallelism(32) // 32 × GOMAXPROCS requests in flight
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := seq.Add(1)
			a, err := svc.Execute(ctx, req(alice, "bench", "k"+strconv.FormatUint(n, 10), benchBatch(n)))
			if err != nil || !a.Terminal || a.Status != 201 {
				b.Fatalf("Execute: %+v, %v", a, err)
			}
		}
	})
}

// BenchmarkExecuteFast is the key-less fast path: one atomic Apply.
func BenchmarkExecuteFast(b *testing.B) {
	svc := benchService(b)
	var seq atomic.Uint64
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := svc.ExecuteFast(ctx, alice, "bench", benchBatch(seq.Add(1))); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReplay answers a retry of a terminal key from memory: validate,
// fingerprint, lookup, compare, stored envelope; nothing is written.
func BenchmarkReplay(b *testing.B) {
	svc := benchService(b)
	const keys = 1024
	reqs := make([]receipt.Request, keys)
	for n := range reqs {
		reqs[n] = req(alice, "bench", "k"+strconv.Itoa(n), benchBatch(uint64(n)))
		if a := mustExecute(b, svc, reqs[n]); a.Status != 201 {
			b.Fatalf("precreate: %+v", a)
		}
	}
	var seq atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a, err := svc.Execute(ctx, reqs[seq.Add(1)%keys])
			if err != nil || !a.Replayed {
				b.Fatalf("replay: %+v, %v", a, err)
			}
		}
	})
}

// BenchmarkDocumentRead reads stored documents (of benchDoc's 190 bytes)
// on a data dir on disk, in RAM (hot) and in the value log after a
// checkpoint (cold: a pread from the page cache and a CRC check), for
// receipt.ColdValue's choice of documents (docs/engine.md, "Documents").
func BenchmarkDocumentRead(b *testing.B) {
	for _, cold := range []bool{false, true} {
		b.Run(map[bool]string{false: "hot", true: "cold"}[cold], func(b *testing.B) {
			db, err := engine.Open(b.TempDir(), engine.Options{Logger: quiet, ColdValue: receipt.ColdValue, CheckpointLogBytes: -1})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			svc, err := receipt.Open(ctx, db, receipt.Options{Logger: quiet, MaintainInterval: -1, CleanInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(svc.Close)
			createTable(b, svc, "bench")
			const batches = 100 // of ten documents
			for n := range uint64(batches) {
				if _, err := svc.ExecuteFast(ctx, alice, "bench", benchBatch(n)); err != nil {
					b.Fatal(err)
				}
			}
			if cold {
				if err := db.Checkpoint(); err != nil {
					b.Fatal(err)
				}
			}
			p := store.NSTable.Prefix()
			if _, n, _, err := db.ScanHot(ctx, p, store.PrefixEnd(p), store.ScanLimitMax); err != nil || (n == batches*10) != cold {
				b.Fatalf("%d documents in the value log (%v), want all if cold, none if hot", n, err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				id := "d" + strconv.Itoa(i%batches) + "-" + strconv.Itoa(i/batches%10)
				if _, err := svc.Tables().Get(ctx, alice, "bench", id); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
