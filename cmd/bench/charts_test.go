package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func result(c, conc int, rate, p50 float64, targets ...Target) Result {
	return Result{Case: caseOf[c], Concurrency: conc, OpsPerSec: rate, P50us: p50, Targets: targets}
}

var caseOf = []string{"keyed", "replay", "fast", "pg-keyed-pipe", "pg-replay", "pg-nokey", casePGHTTPKeyed}

// The peer charts put both sides of a metric on one chart, and only when
// the run measured both; the headline chart draws every scored target.
func TestCharts_PeersBesideIdemAndEveryScoredTarget(t *testing.T) {
	base := filepath.Join(t.TempDir(), "report")
	met := Target{Want: "keyed@64 >= 10000/s", Got: "12000/s", Met: true, Score: 1.2}
	missed := Target{Want: "http keyed@32 >= 2 x pg-http-keyed@32", Got: "1.5x", Met: false, Score: 0.75}
	unscored := Target{Want: "not a number", Got: "?", Met: true}
	suites := []suiteRun{
		{Name: "receipts", Results: []Result{result(0, 1, 2000, 400), result(0, 64, 9000, 7000, met), result(1, 1, 300000, 3), result(2, 64, 20000, 3000)}},
		{Name: "http", Results: []Result{result(0, 1, 1500, 600), result(0, 32, 5000, 6000)}},
		{Name: "peer", Results: []Result{result(3, 1, 1200, 800), result(3, 64, 5000, 12000, missed, unscored), result(6, 32, 3000, 9000)}},
	}
	charts, err := peerCharts(base, suites)
	if err != nil {
		t.Fatal(err)
	}
	// keyed has both sides (rate and p50); replay and nokey have no peer
	// result here, so no chart.
	if len(charts) != 2 {
		t.Fatalf("charts %+v, want keyed's rate and p50 only", charts)
	}
	for _, c := range charts {
		isPNG(t, c.file)
	}
	head, err := targetsChart(base, suites)
	if err != nil || head == nil {
		t.Fatalf("targets chart: %v %v", head, err)
	}
	isPNG(t, head.file)
	if c, err := targetsChart(base, []suiteRun{{Name: "x", Results: []Result{result(0, 1, 1, 1, unscored)}}}); err != nil || c != nil {
		t.Fatalf("a run without scored targets drew %v (%v)", c, err)
	}
}

func isPNG(t *testing.T, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("%s is not a PNG (%v)", file, err)
	}
}
