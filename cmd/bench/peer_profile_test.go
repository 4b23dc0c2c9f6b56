package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestPeerProfiles_TunedRowsNamedApartAndJudgedLast: the tuned profile's
// rows are pg-tuned-*, the default's keep their names, and the tuned one,
// when given, comes last (the judged one).
func TestPeerProfiles_TunedRowsNamedApartAndJudgedLast(t *testing.T) {
	ps := peerProfiles(Options{PG: "d", PGTuned: "t"})
	if len(ps) != 2 || ps[0].tuned || !ps[1].tuned || ps[1].dsn != "t" {
		t.Fatalf("profiles %+v, want default then tuned", ps)
	}
	for base, want := range map[string]string{
		"pg-keyed-pipe": "pg-tuned-keyed-pipe", casePGHTTPKeyed: "pg-tuned-http-keyed", casePGKeyedHot: "pg-tuned-keyed-hot",
	} {
		if got := ps[1].caseName(base); got != want {
			t.Errorf("tuned caseName(%s) = %s, want %s", base, got, want)
		}
		if got := ps[0].caseName(base); got != base {
			t.Errorf("default caseName(%s) = %s, want it unchanged", base, got)
		}
	}
	if ps := peerProfiles(Options{PGTuned: "t"}); len(ps) != 1 || !ps[0].tuned {
		t.Errorf("only -pg-tuned: %+v, want the tuned profile alone", ps)
	}
	if ps := peerProfiles(Options{}); len(ps) != 0 {
		t.Errorf("no DSN: %+v, want none (the suite skips)", ps)
	}
}

// TestPGSettings_LineNamesEverySettingAndCheckRefusesAnOversizedPool.
func TestPGSettings_LineNamesEverySettingAndCheckRefusesAnOversizedPool(t *testing.T) {
	s := pgSettings{SyncCommit: "on", Fsync: "on", CommitDelay: "200", CommitSiblings: "5",
		WALBuffers: "16MB", SharedBuffers: "512MB", MaxConnections: 100, ReservedConnections: 3, Pool: 97}
	want := "commit_delay=200 commit_siblings=5 synchronous_commit=on fsync=on wal_buffers=16MB shared_buffers=512MB max_connections=100 pool_max_conns=97"
	if got := s.line(); got != want {
		t.Errorf("line\n got %s\nwant %s", got, want)
	}
	if err := s.check(); err != nil {
		t.Errorf("a pool of 97 on 100 - 3 slots: %v, want it accepted", err)
	}
	s.Pool = 98
	if err := s.check(); err == nil || !strings.Contains(err.Error(), "max_connections 100") {
		t.Errorf("a pool of 98 on 100 - 3 slots: %v, want a refusal naming max_connections", err)
	}
}

// TestPeerPoolSize_DSNPoolWinsElseOneConnectionPerWorker.
func TestPeerPoolSize_DSNPoolWinsElseOneConnectionPerWorker(t *testing.T) {
	for _, tc := range []struct {
		dsn  string
		maxC int
		want int32
	}{
		{"postgres://u@/db?host=/tmp", 64, 64},
		{"postgres://u@/db?host=/tmp", 2, peerPoolMin},
		{"postgres://u@/db?host=/tmp&pool_max_conns=8", 64, 8},
	} {
		cfg, err := pgxpool.ParseConfig(tc.dsn)
		if err != nil {
			t.Fatal(err)
		}
		if got := peerPoolSize(tc.dsn, cfg, tc.maxC); got != tc.want {
			t.Errorf("peerPoolSize(%s, %d) = %d, want %d", tc.dsn, tc.maxC, got, tc.want)
		}
	}
}

// TestCompareProfile_TargetsOnTheTunedPeersBestOnly: with both profiles,
// Idem's aims are judged on the tuned profile's best keyed flow (here
// pg-tuned-keyed-pipe@64, faster than pg-tuned-keyed) and its pg-http and
// hot rows, each target naming the tuned peer; the default rows carry
// Idem's rates over theirs but no target.
func TestCompareProfile_TargetsOnTheTunedPeersBestOnly(t *testing.T) {
	rs := newRunState(Options{}, t.TempDir(), &strings.Builder{}, &strings.Builder{})
	rs.all = []Result{
		{Suite: "receipts", Case: "keyed", Concurrency: 64, OpsPerSec: 30000},
		{Suite: "receipts", Case: caseKeyedHot, Concurrency: keyedHotConc, OpsPerSec: 15000},
		{Suite: "http", Case: "keyed", Concurrency: httpTargetConc, OpsPerSec: 12000},
	}
	env := newEnv(context.Background(), rs, "peer")
	peerRows := func(p peerProfile, keyed, pipe, httpKeyed float64) []*Result {
		return []*Result{
			{Case: p.caseName("pg-keyed"), Concurrency: 64, OpsPerSec: keyed},
			{Case: p.caseName("pg-keyed-pipe"), Concurrency: 64, OpsPerSec: pipe},
			{Case: p.caseName(casePGKeyedHot), Concurrency: keyedHotConc, OpsPerSec: 900},
			{Case: p.caseName(casePGHTTPKeyed), Concurrency: httpTargetConc, OpsPerSec: httpKeyed},
		}
	}
	ps := peerProfiles(Options{PG: "d", PGTuned: "t"})
	def, tuned := peerRows(ps[0], 2000, 3000, 2500), peerRows(ps[1], 4000, 6000, 5000)
	env.compareProfile(def, ps[0], false)
	env.compareProfile(tuned, ps[1], true)

	for _, r := range def {
		if len(r.Targets) > 0 {
			t.Errorf("default row %s carries targets %v, want none (the tuned peer is judged)", r.Case, r.Targets)
		}
	}
	if x := def[1].Extra["idem_lib_keyed_rate_over_this"]; x != 10.0 {
		t.Errorf("default pg-keyed-pipe@64 idem_lib_keyed_rate_over_this = %v, want 10 (30000 / 3000)", x)
	}
	if len(tuned[0].Targets) > 0 {
		t.Errorf("the slower tuned flow %s is judged: %v", tuned[0].Case, tuned[0].Targets)
	}
	best := tuned[1]
	if x := best.Extra["idem_keyed64_over_this"]; x != 5.0 {
		t.Errorf("idem_keyed64_over_this = %v on %s, want 5 (30000 / 6000)", x, best.Case)
	}
	var met, missed int
	for _, r := range tuned {
		for _, tg := range r.Targets {
			if !strings.Contains(tg.Want, "tuned peer") || !strings.Contains(tg.Want, "pg-tuned-") {
				t.Errorf("target %q does not say it is judged against the tuned peer", tg.Want)
			}
			if tg.Met {
				met++
			} else {
				missed++
			}
		}
	}
	// keyed@64: 5x meets 5 and 3; http keyed@32 over the best: 2x misses
	// 2.5; over pg-tuned-http-keyed: 2.4x meets 2; keyed-hot: 16.7x meets 3.
	if met != 4 || missed != 1 {
		t.Errorf("tuned targets met %d, missed %d; want 4 and 1", met, missed)
	}
}

// TestPeerSettingsLines_OnePerProfileInRunOrder: the report names each
// profile's settings once, whatever the number of rows.
func TestPeerSettingsLines_OnePerProfileInRunOrder(t *testing.T) {
	row := func(prof, line string) Result {
		return Result{Case: "x", Extra: map[string]any{"pg_profile": prof, "pg_settings": line}}
	}
	suites := []suiteRun{
		{Name: "receipts", Results: []Result{row("nope", "not a peer row")}},
		{Name: "peer", Results: []Result{{Case: "fsync-serial", Floor: true},
			row("default", "commit_delay=0"), row("default", "commit_delay=0"), row("tuned", "commit_delay=200")}},
	}
	got := strings.Join(peerSettingsLines(suites), "|")
	if want := "default: commit_delay=0|tuned: commit_delay=200"; got != want {
		t.Errorf("peerSettingsLines = %q, want %q", got, want)
	}
}
