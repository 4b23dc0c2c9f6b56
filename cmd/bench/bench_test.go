package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestBench_JSONLinesMeetTheContract runs the wal and engine suites for a
// few milliseconds per case and checks that every stdout line is one JSON
// object carrying the DESIGN §11 fields and the run-wide fields, and that
// each suite printed the floors next to its own cases.
func TestBench_JSONLinesMeetTheContract(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"-suite", "wal,engine", "-duration", "50ms", "-concurrency", "1,2",
		"-keys", "2000", "-json", "-dir", t.TempDir()}
	if err := run(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}

	required := []string{"suite", "case", "concurrency", "ops", "seconds", "ops_per_sec",
		"p50_us", "p99_us", "fsyncs_per_sec", "go_version", "gomaxprocs", "fs"}
	seen := map[string]map[string]any{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		line := sc.Text()
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Fatalf("line is not a JSON object: %v\n%s", err, line)
		}
		for _, f := range required {
			if _, ok := obj[f]; !ok {
				t.Errorf("line lacks %q: %s", f, line)
			}
		}
		key := fmt.Sprintf("%v/%v/%v", obj["suite"], obj["case"], obj["concurrency"])
		seen[key] = obj
		if obj["floor"] == true {
			continue
		}
		if ops, _ := obj["ops"].(float64); ops <= 0 {
			t.Errorf("no ops measured: %s", line)
		}
	}
	want := []string{
		"wal/fsync-serial/1", "wal/fsync-group/64", "wal/tidwall-batch64/1",
		"wal/append/1", "wal/append/2",
		"engine/fsync-serial/1", "engine/fsync-group/64", "engine/tidwall-batch64/1",
		"engine/apply/1", "engine/apply/2", "engine/recovery/1",
	}
	for _, k := range want {
		if _, ok := seen[k]; !ok {
			t.Errorf("missing result %s; have %v", k, keys(seen))
		}
	}
	if len(seen) != len(want) {
		t.Errorf("got %d distinct results, want %d: %v", len(seen), len(want), keys(seen))
	}
	if r := seen["engine/apply/2"]; r != nil && r["ratio_to_floor"] == nil {
		t.Errorf("apply lacks ratio_to_floor: %v", r)
	}
	if r := seen["engine/recovery/1"]; r != nil {
		if ops, _ := r["ops"].(float64); ops != 2100 {
			t.Errorf("recovery reopened %v keys, want 2100 (2000 + 5%% tail)", r["ops"])
		}
		if b, _ := r["bytes_per_key"].(float64); b <= 0 {
			t.Errorf("recovery bytes_per_key = %v, want > 0", r["bytes_per_key"])
		}
	}
	// Floors are measured once per run: both suites print the same numbers.
	if a, b := seen["wal/fsync-group/64"], seen["engine/fsync-group/64"]; a != nil && b != nil && a["ops"] != b["ops"] {
		t.Errorf("fsync-group measured twice: %v vs %v ops", a["ops"], b["ops"])
	}
	// With -json the tables go to stderr, keeping stdout machine-readable.
	if !strings.Contains(stderr.String(), "== suite engine") {
		t.Errorf("no engine table on stderr:\n%s", stderr.String())
	}
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
