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

// judgedPeer runs both profiles' comparisons and the judging over rows
// whose keyed, pipelined keyed, HTTP keyed and keyed-hot rates are given
// per profile (default first), against Idem's keyed@64 30 000, keyed-hot
// 15 000 and HTTP keyed@32 12 000 req/s.
func judgedPeer(t *testing.T, def, tuned [4]float64) (defRows, tunedRows []*Result) {
	t.Helper()
	rs := newRunState(Options{}, t.TempDir(), &strings.Builder{}, &strings.Builder{})
	rs.all = []Result{
		{Suite: "receipts", Case: "keyed", Concurrency: 64, OpsPerSec: 30000},
		{Suite: "receipts", Case: caseKeyedHot, Concurrency: keyedHotConc, OpsPerSec: 15000},
		{Suite: "http", Case: "keyed", Concurrency: httpTargetConc, OpsPerSec: 12000},
	}
	env := newEnv(context.Background(), rs, "peer")
	rows := func(p peerProfile, rate [4]float64) []*Result {
		return []*Result{
			{Case: p.caseName("pg-keyed"), Concurrency: 64, OpsPerSec: rate[0]},
			{Case: p.caseName("pg-keyed-pipe"), Concurrency: 64, OpsPerSec: rate[1]},
			{Case: p.caseName(casePGHTTPKeyed), Concurrency: httpTargetConc, OpsPerSec: rate[2]},
			{Case: p.caseName(casePGKeyedHot), Concurrency: keyedHotConc, OpsPerSec: rate[3]},
		}
	}
	ps := peerProfiles(Options{PG: "d", PGTuned: "t"})
	defRows, tunedRows = rows(ps[0], def), rows(ps[1], tuned)
	env.compareProfile(defRows, ps[0])
	env.compareProfile(tunedRows, ps[1])
	env.judgePeer(append(append([]*Result{}, defRows...), tunedRows...), ps)
	return defRows, tunedRows
}

// targetsOn lists the targets each row carries, as "case: want" lines.
func targetsOn(rows ...[]*Result) map[string][]Target {
	out := map[string][]Target{}
	for _, rs := range rows {
		for _, r := range rs {
			if len(r.Targets) > 0 {
				out[r.Case] = r.Targets
			}
		}
	}
	return out
}

// TestJudgePeer_TargetsOnTheFasterProfilesRow: every aim is judged on the
// peer's fastest row for it over both profiles — the tuned server's where
// its settings ran faster, the default's where they did not — and each
// target names that row and its profile; every row carries Idem's rate
// over it either way.
func TestJudgePeer_TargetsOnTheFasterProfilesRow(t *testing.T) {
	// Tuned faster at every flow: the tuned rows are judged, the keyed aims
	// on pg-tuned-keyed-pipe@64 (faster than pg-tuned-keyed).
	def, tuned := judgedPeer(t, [4]float64{2000, 3000, 2500, 900}, [4]float64{4000, 6000, 5000, 1000})
	got := targetsOn(def, tuned)
	if len(got) != 3 || len(got["pg-tuned-keyed-pipe"]) != 3 || len(got[tuned[2].Case]) != 1 || len(got[tuned[3].Case]) != 1 {
		t.Fatalf("targets on %v; want 3 on pg-tuned-keyed-pipe, 1 each on the tuned HTTP keyed and keyed-hot rows", keysOf(got))
	}
	if x := tuned[1].Extra["idem_keyed64_over_this"]; x != 5.0 {
		t.Errorf("idem_keyed64_over_this = %v, want 5 (30000 / 6000)", x)
	}
	if x := def[1].Extra["idem_lib_keyed_rate_over_this"]; x != 10.0 {
		t.Errorf("default pg-keyed-pipe@64 idem_lib_keyed_rate_over_this = %v, want 10 (30000 / 3000)", x)
	}
	// keyed@64 5x meets 5 and 3; HTTP keyed@32 over the best keyed: 2x
	// misses 2.5; over pg-tuned-http-keyed: 2.4x meets 2; keyed-hot 15x
	// meets 3.
	wantVerdicts(t, got, 4, 1, "tuned")

	// The default server faster at pipelined keyed and HTTP keyed, the
	// tuned one at keyed-hot: each aim on its faster row.
	def, tuned = judgedPeer(t, [4]float64{2000, 7500, 6000, 900}, [4]float64{4000, 6000, 5000, 1000})
	got = targetsOn(def, tuned)
	if len(got) != 3 || len(got["pg-keyed-pipe"]) != 3 || len(got[def[2].Case]) != 1 || len(got[tuned[3].Case]) != 1 {
		t.Fatalf("targets on %v; want 3 on pg-keyed-pipe, 1 each on the default HTTP keyed and the tuned keyed-hot rows", keysOf(got))
	}
	if x := def[1].Extra["idem_keyed64_over_this"]; x != 4.0 {
		t.Errorf("idem_keyed64_over_this = %v, want 4 (30000 / 7500)", x)
	}
	// keyed@64 4x misses 5, meets 3; HTTP keyed@32 1.6x misses 2.5; over
	// pg-http-keyed 2x meets 2; keyed-hot meets 3.
	wantVerdicts(t, got, 3, 2, "")
}

// TestJudgePeer_P50OnTheQuickerPipelinedFlow: Idem's keyed p50@1 is
// judged against the lower of the two servers' pipelined keyed p50@1,
// whichever server measured it, and only there.
func TestJudgePeer_P50OnTheQuickerPipelinedFlow(t *testing.T) {
	for _, tc := range []struct {
		defP50, tunedP50 float64
		want             string
	}{{700, 800, "pg-keyed-pipe"}, {800, 700, "pg-tuned-keyed-pipe"}} {
		rs := newRunState(Options{}, t.TempDir(), &strings.Builder{}, &strings.Builder{})
		rs.all = []Result{{Suite: "receipts", Case: "keyed", Concurrency: 1, OpsPerSec: 4000, P50us: 210}}
		env := newEnv(context.Background(), rs, "peer")
		ps := peerProfiles(Options{PG: "d", PGTuned: "t"})
		rows := []*Result{
			{Case: ps[0].caseName("pg-keyed-pipe"), Concurrency: 1, OpsPerSec: 1300, P50us: tc.defP50},
			{Case: ps[1].caseName("pg-keyed-pipe"), Concurrency: 1, OpsPerSec: 1200, P50us: tc.tunedP50},
		}
		env.judgePeer(rows, ps)
		got := targetsOn(rows)
		if len(got) != 1 || len(got[tc.want]) != 1 {
			t.Fatalf("p50s %v / %v: targets on %v, want one on %s", tc.defP50, tc.tunedP50, keysOf(got), tc.want)
		}
		if tg := got[tc.want][0]; !tg.Met || !strings.Contains(tg.Got, "0.300x") {
			t.Errorf("p50s %v / %v: target %+v, want met at 0.300x (210 / 700)", tc.defP50, tc.tunedP50, tg)
		}
	}
}

func keysOf(m map[string][]Target) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// wantVerdicts checks how many targets were met and missed, and that each
// names its row and, if profile is set, that profile.
func wantVerdicts(t *testing.T, got map[string][]Target, met, missed int, profile string) {
	t.Helper()
	var m, x int
	for name, targets := range got {
		for _, tg := range targets {
			if !strings.Contains(tg.Want, name) {
				t.Errorf("target %q does not name its row %s", tg.Want, name)
			}
			if profile != "" && !strings.Contains(tg.Want, profile) {
				t.Errorf("target %q does not name the %s profile", tg.Want, profile)
			}
			if tg.Met {
				m++
			} else {
				x++
			}
		}
	}
	if m != met || x != missed {
		t.Errorf("targets met %d, missed %d; want %d and %d", m, x, met, missed)
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
