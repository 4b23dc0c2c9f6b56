package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBench_CaseProfilesOnePerMeasuredWindow: -cpuprofile-cases writes one
// gzipped pprof profile per measured case, named by suite, case and
// concurrency; with -cpuprofile as well, or into a missing directory, the
// run is refused before anything is measured.
func TestBench_CaseProfilesOnePerMeasuredWindow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := []string{"-suite", "wal", "-duration", "20ms", "-concurrency", "1,2", "-json", "-dir", t.TempDir(), "-cpuprofile-cases", dir}
	if err := run(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	seen, _ := contractLines(t, &stdout)
	for k := range seen { // suite/case/concurrency
		parts := strings.Split(k, "/")
		name := filepath.Join(dir, parts[0]+"-"+parts[1]+"-c"+parts[2]+".prof")
		b, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("result %s: no profile: %v", k, err)
			continue
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s: not a gzipped pprof profile (%d bytes)", name, len(b))
		}
	}
	if len(seen) == 0 {
		t.Fatal("no results: the check is vacuous")
	}
	for _, bad := range [][]string{
		{"-cpuprofile-cases", dir, "-cpuprofile", filepath.Join(dir, "all.prof")},
		{"-cpuprofile-cases", filepath.Join(dir, "missing")},
	} {
		if err := run(ctx, append([]string{"-suite", "wal", "-duration", "20ms"}, bad...), &stdout, &stderr); err == nil {
			t.Errorf("run %v: want an error", bad)
		}
	}
}
