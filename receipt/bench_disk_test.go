package receipt_test

import (
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/receipt"
)

// The keyed and key-less flows on a real directory, as cmd/bench's
// receipts:keyed and receipts:fast run them (issue 41: keyed@64 against
// fast@64), with the process's CPU per request as a metric: on a loaded
// machine wall time per op says more about the neighbours than about the
// code, CPU per op far less (cmd/bench/cpu.go). memfs, which the other
// benchmarks use, spends most of their profile copying its files.

func diskService(b *testing.B) *receipt.Service {
	db, err := engine.Open(b.TempDir(), engine.Options{Logger: quiet, ColdValue: receipt.ColdValue})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := receipt.Open(ctx, db, receipt.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		svc.Close()
		db.Close()
	})
	createTable(b, svc, "bench")
	return svc
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runDisk runs op from 64 goroutines (the c=64 of cmd/bench) and reports
// the process's CPU µs per op.
func runDisk(b *testing.B, op func(n uint64) error) {
	var seq atomic.Uint64
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(seq.Add(1)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N)/1e3, "cpu-µs/op")
}

func BenchmarkDiskKeyed(b *testing.B) {
	svc := diskService(b)
	runDisk(b, func(n uint64) error {
		_, err := svc.Execute(ctx, req(alice, "bench", "k"+strconv.FormatUint(n, 10), benchBatch(n)))
		return err
	})
}

func BenchmarkDiskFast(b *testing.B) {
	svc := diskService(b)
	runDisk(b, func(n uint64) error {
		_, err := svc.ExecuteFast(ctx, alice, "bench", benchBatch(n))
		return err
	})
}
