package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBench_JSONLinesMeetTheContract runs the wal and engine suites for a
// few milliseconds per case and checks that every stdout line is one JSON
// object carrying the docs/design.md §11 fields and the run-wide fields, and that
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

	seen, _ := contractLines(t, &stdout)
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
	if r := seen["engine/apply/2"]; r != nil {
		if cpu, _ := r["cpu_us_per_op"].(float64); cpu <= 0 {
			t.Errorf("apply cpu_us_per_op = %v, want > 0", r["cpu_us_per_op"])
		}
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

// contractLines checks every stdout line against the docs/design.md §11 contract:
// one JSON object with the required fields, and ops measured unless it is a
// floor or a skipped suite. It returns the lines by suite/case/concurrency
// and how many lines each case printed.
func contractLines(t *testing.T, stdout *bytes.Buffer) (seen map[string]map[string]any, count map[string]int) {
	t.Helper()
	required := []string{"suite", "case", "concurrency", "ops", "seconds", "ops_per_sec",
		"p50_us", "p99_us", "fsyncs_per_sec", "go_version", "gomaxprocs", "fs"}
	seen, count = map[string]map[string]any{}, map[string]int{}
	sc := bufio.NewScanner(stdout)
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
		seen[fmt.Sprintf("%v/%v/%v", obj["suite"], obj["case"], obj["concurrency"])] = obj
		count[fmt.Sprint(obj["case"])]++
		if obj["floor"] == true || obj["skipped"] == true {
			continue
		}
		if ops, _ := obj["ops"].(float64); ops <= 0 {
			t.Errorf("no ops measured: %s", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading stdout: %v", err)
	}
	return seen, count
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestBench_EverySuiteRunsAndReports runs every suite for a few
// milliseconds per case on tiny stores (the peer without -pg, so skipped;
// IDEM_BENCH_PG and IDEM_BENCH_PG_TUNED name servers for it) and checks each JSON line against the contract, the cases each suite
// promises, the ratios the receipts and http suites add, that `all` runs
// reopen and renewal once (in their own suites), and the -out report.
func TestBench_EverySuiteRunsAndReports(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out", "report.md")
	var stdout, stderr bytes.Buffer
	args := []string{"-suite", "all", "-duration", "20ms", "-concurrency", "1,2",
		"-keys", "2000", "-receipts", "2000", "-replay-keys", "32", "-json", "-dir", filepath.Join(dir, "data"), "-out", out}
	if dsn := os.Getenv("IDEM_BENCH_PG"); dsn != "" {
		args = append(args, "-pg", dsn)
	}
	if dsn := os.Getenv("IDEM_BENCH_PG_TUNED"); dsn != "" {
		args = append(args, "-pg-tuned", dsn)
	}
	if err := run(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	seen, count := contractLines(t, &stdout)
	var want []string
	for _, s := range []string{"wal", "engine", "twopc", "receipts", "etcd", "http", "recovery", "renewal", "peer"} {
		want = append(want, s+"/fsync-serial/1", s+"/fsync-group/64", s+"/tidwall-batch64/1")
	}
	for _, c := range []string{"1", "2"} {
		want = append(want, "wal/append/"+c, "engine/apply/"+c, "twopc/fast/"+c, "twopc/twopc/"+c, "twopc/twopc-2w/"+c,
			"receipts/keyed/"+c, "receipts/keyed-hot/"+c, "receipts/keyed-floor/"+c, "receipts/fast/"+c, "receipts/replay/"+c, "receipts/replay-vlog/"+c,
			"receipts/keyed-10x/"+c, "receipts/session-10x10/"+c,
			"etcd/txn/"+c, "etcd/txn-nested24/"+c, "etcd/txn-12keys/"+c, "etcd/apply/"+c, "etcd/keyed/"+c, "etcd/replay/"+c, "etcd/keyed-hot/"+c,
			"http/http-floor/"+c, "http/http-post-floor/"+c, "http/http-post-wait-floor/"+c, "http/keyed/"+c, "http/keyed-hot/"+c, "http/fast/"+c, "http/replay/"+c, "http/replay-vlog/"+c, "http/keyed-10x/"+c, "http/session-10x10/"+c)
	}
	want = append(want, "receipts/replay-vlog-cold/1", "recovery/recovery/1", "recovery/replay/1", "recovery/read-floor/1", "recovery/read-floor-disk/1", "recovery/reopen-2k-receipts/1", "recovery/reopen-2k-receipts-in-ram/1", "recovery/reopen-2k-docs/1", "recovery/reopen-2k-tombstones/1", "renewal/renewal/1")
	want = append(want, "recovery/restart-growing-2k-receipts/1")
	profiles := peerProfiles(Options{PG: os.Getenv("IDEM_BENCH_PG"), PGTuned: os.Getenv("IDEM_BENCH_PG_TUNED")})
	if len(profiles) == 0 {
		want = append(want, "peer/skipped/0")
	}
	for _, p := range profiles {
		for _, c := range []string{"1", "2"} {
			for _, name := range peerCases {
				want = append(want, "peer/"+p.caseName(name)+"/"+c)
			}
		}
	}
	for _, k := range want {
		if _, ok := seen[k]; !ok {
			t.Errorf("missing result %s", k)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("got %d distinct results, want %d: %v", len(seen), len(want), keys(seen))
	}
	// The hot-document cases count what contention refused (issue 37).
	for _, k := range []string{"receipts/keyed-hot/1", "http/keyed-hot/2"} {
		if r := seen[k]; r != nil && r[fieldAbortsPerOp] == nil {
			t.Errorf("%s lacks %s: %v", k, fieldAbortsPerOp, r)
		}
	}
	// -suite all measures the heavy cases once, in their own suites.
	for _, c := range []string{"recovery", "reopen-2k-receipts", "renewal"} {
		if count[c] != 1 {
			t.Errorf("case %s reported %d times, want once", c, count[c])
		}
	}
	for _, k := range []string{"receipts/keyed/1", "http/keyed/1"} {
		r := seen[k]
		for _, f := range []string{"keyed_over_fast_rate", "fsync_waits_p50", "fsyncs_per_op", "targets"} {
			if r != nil && r[f] == nil {
				t.Errorf("%s lacks %s: %v", k, f, r)
			}
		}
	}
	for _, k := range []string{"receipts/session-10x10/2", "http/session-10x10/2"} {
		checkSessionLine(t, k, seen[k])
	}
	if r := seen["etcd/keyed/1"]; r != nil {
		if trips, _ := r["round_trips_per_request"].(float64); trips < 1 {
			t.Errorf("etcd keyed round_trips_per_request = %v, want at least one Txn", r["round_trips_per_request"])
		}
		if b, _ := r["bbolt_bytes_per_receipt"].(float64); b <= 0 {
			t.Errorf("etcd keyed bbolt_bytes_per_receipt = %v, want > 0", r["bbolt_bytes_per_receipt"])
		}
	}
	if r := seen["twopc/twopc/1"]; r != nil && (r["fsync_waits_p50"] == nil || r["ratio_to_floor"] == nil) {
		t.Errorf("twopc lacks fsync_waits_p50 or ratio_to_floor: %v", r)
	}
	if r := seen["recovery/reopen-2k-receipts/1"]; r != nil {
		if b, _ := r["bytes_per_receipt"].(float64); b <= 0 {
			t.Errorf("reopen bytes_per_receipt = %v, want > 0", r["bytes_per_receipt"])
		}
		if e, _ := r["envelope_bytes"].(float64); e != reopenEnvelopeBytes {
			t.Errorf("reopen envelope_bytes = %v, want %d", r["envelope_bytes"], reopenEnvelopeBytes)
		}
	}
	if r := seen["recovery/restart-growing-2k-receipts/1"]; r != nil {
		// 2 000 batches log far less than an interval: the open replays them.
		if b, _ := r["replayed_bytes"].(float64); b <= 0 {
			t.Errorf("restart-growing replayed_bytes = %v, want the log the fill left", r["replayed_bytes"])
		}
	}
	if r := seen["recovery/reopen-2k-tombstones/1"]; r != nil {
		if b, _ := r["bytes_per_tombstone"].(float64); b <= 0 {
			t.Errorf("reopen bytes_per_tombstone = %v, want > 0", r["bytes_per_tombstone"])
		}
	}
	if r := seen["recovery/reopen-2k-docs/1"]; r != nil {
		if b, _ := r["bytes_per_doc"].(float64); b <= 0 {
			t.Errorf("reopen bytes_per_doc = %v, want > 0", r["bytes_per_doc"])
		}
	}
	if r := seen["renewal/renewal/1"]; r != nil {
		if a, _ := r["applies_per_pass"].(float64); a != 1 {
			t.Errorf("renewal applies_per_pass = %v, want 1", r["applies_per_pass"])
		}
		if ops, _ := r["ops"].(float64); int(ops)%renewalSetSize != 0 {
			t.Errorf("renewal ops = %v, want whole rounds of %d", ops, renewalSetSize)
		}
	}
	if r := seen["peer/skipped/0"]; r != nil && !strings.Contains(fmt.Sprint(r["reason"]), "-pg postgres://") {
		t.Errorf("peer skip line lacks the -pg hint: %v", r)
	}
	if !strings.Contains(stderr.String(), "skipped: pass -pg postgres://") && len(profiles) == 0 {
		t.Errorf("no skip line in the peer table:\n%s", stderr.String())
	}

	// The report: machine, targets, a table per suite, charts beside it.
	md, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"## Machine", "| CPU |", "## Targets", "report-targets.png", "## Suite `receipts`", "| keyed | 2 |", "receipts-throughput.png", "http-latency.png"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("report lacks %q", s)
		}
	}
	if len(profiles) > 0 && !strings.Contains(string(md), "vs-peer-keyed-rate.png") {
		t.Errorf("report with a peer lacks the keyed comparison chart")
	}
	pngs, _ := filepath.Glob(filepath.Join(dir, "out", "report-*.png"))
	if len(pngs) < 8 {
		t.Errorf("got %d charts, want one or two per suite: %v", len(pngs), pngs)
	}
	for _, p := range pngs {
		if b, err := os.ReadFile(p); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s is not a PNG (%v)", p, err)
		}
	}
}

// checkSessionLine checks a session-10x10 line: whole units of batches,
// its per-unit figures and its ratios to keyed-10x of the same run.
func checkSessionLine(t *testing.T, k string, r map[string]any) {
	t.Helper()
	if r == nil {
		return // reported missing by the caller
	}
	if ops, _ := r["ops"].(float64); int(ops)%unitBatches != 0 {
		t.Errorf("%s ops = %v, want whole units of %d batches", k, ops, unitBatches)
	}
	for _, f := range []string{"units_per_sec", "fsyncs_per_unit", "wal_bytes_per_unit",
		"session_over_keyed10x_time", "session_over_keyed10x_p50", "session_over_keyed10x_wal_bytes"} {
		if v, _ := r[f].(float64); v <= 0 {
			t.Errorf("%s: %s = %v, want > 0", k, f, r[f])
		}
	}
}

// TestBench_CaseSelectsCases: -case narrows the receipts suite to the
// session pair (floors still first), with its ratios; entries that name no
// case, or suites that cannot select cases, are refused.
func TestBench_CaseSelectsCases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"-suite", "receipts", "-case", "session-10x10,receipts:keyed-10x", "-duration", "20ms",
		"-concurrency", "1,2", "-json", "-dir", t.TempDir()}
	if err := run(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	seen, _ := contractLines(t, &stdout)
	want := []string{"receipts/fsync-serial/1", "receipts/fsync-group/64", "receipts/tidwall-batch64/1",
		"receipts/keyed-10x/1", "receipts/session-10x10/1", "receipts/keyed-10x/2", "receipts/session-10x10/2"}
	for _, k := range want {
		if _, ok := seen[k]; !ok {
			t.Errorf("missing result %s; have %v", k, keys(seen))
		}
	}
	if len(seen) != len(want) {
		t.Errorf("got %d distinct results, want %d: %v", len(seen), len(want), keys(seen))
	}
	checkSessionLine(t, "receipts/session-10x10/1", seen["receipts/session-10x10/1"])

	suites := func(names string) []Suite {
		ss, err := selectSuites(names)
		if err != nil {
			t.Fatal(err)
		}
		return ss
	}
	if got, err := selectCases("keyed-10x", suites("receipts,http")); err != nil || !got["receipts"][caseKeyed10x] || !got["http"][caseKeyed10x] {
		t.Errorf("selectCases(keyed-10x) over receipts,http = %v, %v", got, err)
	}
	if got, err := selectCases("", suites("receipts")); err != nil || got != nil {
		t.Errorf("selectCases(\"\") = %v, %v, want nil (every case)", got, err)
	}
	for _, c := range []struct{ list, suites string }{
		{"keyed", "wal"},                    // wal runs all its cases
		{"receipts:nope", "receipts"},       // no such case
		{"http:keyed", "receipts"},          // http not selected
		{"receipts:keyed", "receipts,http"}, // leaves http with nothing to run
	} {
		if got, err := selectCases(c.list, suites(c.suites)); err == nil {
			t.Errorf("selectCases(%q) over %s = %v, want an error", c.list, c.suites, got)
		}
	}
}

// TestBench_PeerRunsLast: a suite that compares with the others of the
// same run goes last whatever order -suite gave.
func TestBench_PeerRunsLast(t *testing.T) {
	ss, err := selectSuites("peer,receipts,http")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range ss {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "receipts,http,peer" {
		t.Errorf("order %s, want receipts,http,peer", got)
	}
	if n := reopenCaseName(1_000_000); n != "reopen-1M-receipts" {
		t.Errorf("reopenCaseName(1M) = %s", n)
	}
	if n := reopenCaseName(100_000); n != "reopen-100k-receipts" {
		t.Errorf("reopenCaseName(100k) = %s", n)
	}
}

// crashloopTestMax only stops a hung crash loop: the suite builds idemd
// first, which took over 50 s on a cold cache with a load average of 25
// on the 2 cores (the build was killed).
const crashloopTestMax = 5 * time.Minute

// TestBench_CrashloopKillsRestartsAndReplays runs the crashloop suite in a
// tiny configuration — the real idemd, built here, SIGKILLed 3 times under
// 4 keyed clients — and checks its report lines and that every sampled
// acknowledged key replayed its 201. It asserts no timing.
func TestBench_CrashloopKillsRestartsAndReplays(t *testing.T) {
	if testing.Short() {
		t.Skip("builds idemd and crash-loops it: about 3 s with a warm build cache, much longer on a cold one")
	}
	ctx, cancel := context.WithTimeout(context.Background(), crashloopTestMax)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"-suite", "crashloop", "-duration", "20ms", "-crashloop-kills", "3",
		"-crashloop-interval", "300ms-500ms", "-crashloop-clients", "4", "-json", "-dir", t.TempDir()}
	if err := run(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	seen, _ := contractLines(t, &stdout)
	want := []string{"crashloop/fsync-serial/1", "crashloop/fsync-group/64", "crashloop/tidwall-batch64/1",
		"crashloop/healthy-after-kill-1/4", "crashloop/healthy-after-kill-3/4", "crashloop/healthy-ratio/4",
		"crashloop/open-phases/4", "crashloop/disk/4", "crashloop/keyed-load/4", "crashloop/exactly-once/4"}
	for _, k := range want {
		if _, ok := seen[k]; !ok {
			t.Errorf("missing result %s; have %v", k, keys(seen))
		}
	}
	if len(seen) != len(want) {
		t.Errorf("got %d distinct results, want %d: %v", len(seen), len(want), keys(seen))
	}
	for _, k := range []string{"crashloop/healthy-after-kill-1/4", "crashloop/healthy-after-kill-3/4"} {
		if r := seen[k]; r != nil {
			if p, _ := r["p50_us"].(float64); p <= 0 {
				t.Errorf("%s: p50_us (time to healthy) = %v, want > 0", k, r["p50_us"])
			}
		}
	}
	if r := seen["crashloop/healthy-ratio/4"]; r != nil {
		for _, f := range []string{"first_ms", "last_ms", "ratio", "median_first10_ms", "median_last10_ms", "targets"} {
			if r[f] == nil {
				t.Errorf("healthy-ratio lacks %s: %v", f, r)
			}
		}
		if k, _ := r["kills"].(float64); k != 3 {
			t.Errorf("healthy-ratio kills = %v, want 3", r["kills"])
		}
	}
	if r := seen["crashloop/open-phases/4"]; r != nil {
		// Every open reports its phases, from idemd's "recovered" line.
		for _, f := range []string{"chain_mb_by_tenth", "chain_load_ms_by_tenth", "replay_ms_by_tenth", "fit_fixed_ms", "fit_ms_per_chain_gb"} {
			if r[f] == nil {
				t.Errorf("open-phases lacks %s: %v", f, r)
			}
		}
	}
	if r := seen["crashloop/disk/4"]; r != nil {
		if b, _ := r["max_wal_bytes"].(float64); b <= 0 {
			t.Errorf("disk max_wal_bytes = %v, want > 0", r["max_wal_bytes"])
		}
		if d, w := r["max_data_bytes"].(float64), r["max_wal_bytes"].(float64); d < w {
			t.Errorf("disk max_data_bytes %v < max_wal_bytes %v", d, w)
		}
	}
	if r := seen["crashloop/keyed-load/4"]; r != nil {
		if a, _ := r["acked"].(float64); a <= 0 {
			t.Errorf("keyed-load acked = %v, want > 0", r["acked"])
		}
	}
	if r := seen["crashloop/exactly-once/4"]; r != nil {
		s, _ := r["sampled"].(float64)
		if s <= 0 || r["replayed_201"] != s || r["documents_present"] != s || r["mismatches"] != 0.0 {
			t.Errorf("exactly-once sample did not pass: %v", r)
		}
	}
}

// TestBench_CapacityFillsReopensAndReports runs the capacity suite on a
// small store: the curve has a point before the fill and after each step,
// and the figures it reports are there and sane.
func TestBench_CapacityFillsReopensAndReports(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"-suite", "capacity", "-capacity", "2000", "-duration", "20ms", "-json", "-dir", t.TempDir()}
	if err := run(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	seen, _ := contractLines(t, &stdout)
	r := seen["capacity/capacity-2k-receipts/1"]
	if r == nil {
		t.Fatalf("no capacity result: %v", keys(seen))
	}
	curve, _ := r["keyed_curve"].([]any)
	if len(curve) != capacityStages+1 {
		t.Errorf("keyed curve %v: want %d points", r["keyed_curve"], capacityStages+1)
	}
	for _, k := range []string{"bytes_per_receipt", "disk_bytes_per_receipt", "reopen_seconds", "vlog_live_bytes"} {
		if v, ok := r[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive figure", k, r[k])
		}
	}
}

// TestBench_CrashloopIsOptIn: the default run and -suite all leave the
// opt-in suites (crashloop, capacity) out; naming one runs it.
func TestBench_CrashloopIsOptIn(t *testing.T) {
	for _, list := range []string{"", "all"} {
		ss, err := selectSuites(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ss {
			if s.Name == "crashloop" || s.Name == "capacity" {
				t.Errorf("selectSuites(%q) includes %s", list, s.Name)
			}
		}
	}
	if ss, err := selectSuites("crashloop"); err != nil || len(ss) != 1 || ss[0].Name != "crashloop" {
		t.Errorf("selectSuites(crashloop) = %v, %v", ss, err)
	}
	for _, c := range []struct {
		in     string
		lo, hi time.Duration
		bad    bool
	}{
		{in: "2s-5s", lo: 2 * time.Second, hi: 5 * time.Second},
		{in: "300ms-500ms", lo: 300 * time.Millisecond, hi: 500 * time.Millisecond},
		{in: "3s", lo: 3 * time.Second, hi: 3 * time.Second},
		{in: "5s-2s", bad: true}, {in: "0s", bad: true}, {in: "x", bad: true}, {in: "1s-", bad: true},
	} {
		lo, hi, err := parseCrashInterval(c.in)
		if (err != nil) != c.bad || (!c.bad && (lo != c.lo || hi != c.hi)) {
			t.Errorf("parseCrashInterval(%q) = %v, %v, %v", c.in, lo, hi, err)
		}
	}
}

// TestBench_ClusterReportsScalingAndForwarding runs the opt-in cluster
// suite briefly: every case reports, with the scaling and forwarding
// figures beside them. It asserts no timing.
func TestBench_ClusterReportsScalingAndForwarding(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"-suite", "cluster", "-duration", "20ms", "-concurrency", "1,2", "-replay-keys", "16", "-json", "-dir", t.TempDir()}
	if err := run(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	seen, _ := contractLines(t, &stdout)
	for _, c := range []string{"1", "2"} {
		for _, k := range []string{"txn", "keyed-1n", "replay-1n", "keyed-3n", "replay-3n", "dup-2n", "keyed-hot", "cluster-shards"} {
			if _, ok := seen["cluster/"+k+"/"+c]; !ok {
				t.Errorf("missing result cluster/%s/%s", k, c)
			}
		}
	}
	if r := seen["cluster/keyed-3n/2"]; r != nil && (r["scaling_1_to_3"] == nil || r["forwarded_share"] == nil) {
		t.Errorf("keyed-3n lacks scaling_1_to_3 or forwarded_share: %v", r)
	}
	if r := seen["cluster/keyed-hot/2"]; r != nil && (r["aborts_per_op"] == nil || r["replans_per_op"] == nil) {
		t.Errorf("keyed-hot lacks aborts_per_op or replans_per_op: %v", r)
	}
	if r := seen["cluster/cluster-shards/2"]; r != nil && (r["over_1_shard"] == nil || r["shards"] != 2.0) {
		t.Errorf("cluster-shards lacks over_1_shard or shards 2: %v", r)
	}
}
