package main

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"
)

// TestBench_URingSuiteComparesBothWritePaths: the io_uring experiment
// appends and syncs through both paths (on Linux), reports a row for each
// with the records it made durable, and the interleaved p50 ratio with its
// spread on the io_uring row.
func TestBench_URingSuiteComparesBothWritePaths(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("io_uring is Linux's")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"-suite", "uring", "-duration", "40ms", "-json", "-dir", t.TempDir()}
	if err := run(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	seen, _ := contractLines(t, &stdout)
	for _, c := range []string{caseSyscallSerial, caseURingSerial} {
		r := seen["uring/"+c+"/1"]
		if r == nil {
			t.Fatalf("no %s row; stderr:\n%s", c, stderr.String())
		}
		if f, _ := r["fsyncs_per_sec"].(float64); f <= 0 {
			t.Errorf("%s: fsyncs_per_sec %v, want each record synced", c, r["fsyncs_per_sec"])
		}
	}
	r := seen["uring/"+caseURingSerial+"/1"]
	for _, k := range []string{"uring_over_syscall_p50", "uring_over_syscall_p50_lo", "uring_over_syscall_p50_hi"} {
		if v, ok := r[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive ratio", k, r[k])
		}
	}
}
