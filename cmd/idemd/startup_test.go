package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/internal/testsupport"
)

// TestRun_StartupLogReportsVersionSettingsAndRecovery: the start-up log
// names the version, every setting in force with defaults applied (the
// renewal interval from the lease TTL, the request timeout raised above
// -wait-max) and what the open recovered: the store, the log replayed,
// the receipts by state — one left started by a failed decision is to be
// adopted — and how long the open took.
func TestRun_StartupLogReportsVersionSettingsAndRecovery(t *testing.T) {
	data := t.TempDir()
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice:tok-alice-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"-addr", "127.0.0.1:0", "-data", data, "-tokens", tokens, "-lease-ttl", "3s",
		"-wait-max", "90s", "-request-timeout", "30s", "-separate-decide", "-session-ttl-max", "2m", "-sessions-max", "64"}
	first := startRun(t, args...)
	c := apitest.NewClient(t, "http://"+first.addr).WithToken("tok-alice-0123456789")
	c.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	c.Do("POST", "/v1/tables/t/batch", `{"deletes":["a"]}`, "Idempotency-Key", "done").JSON(t, 201, nil)
	started := 0
	if fault.Compiled {
		// The decision fails once: that receipt stays started.
		disarm := testsupport.Arm(t, fault.ReceiptDecideBefore, "1*return(true)")
		r := c.Do("POST", "/v1/tables/t/batch", `{"deletes":["b"]}`, "Idempotency-Key", "stuck")
		disarm()
		if r.Status < 500 {
			t.Fatalf("batch with a failing decision: %d %s", r.Status, r.Body)
		}
		started = 1
	}
	c.CloseIdleConnections()
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}

	p := startRun(t, args...)
	version, _ := buildVersion()
	st := p.wait("idemd: starting")
	if st["version"] != version || version == "" || st["go"] == "" {
		t.Fatalf("starting line %v, want version %q", st, version)
	}
	want := map[string]any{
		"addr": "127.0.0.1:0", "data": data, "tokens": tokens, "node": "node-0",
		"lease_ttl": "3s", "renew_interval": "1s", "retention": "24h0m0s", "tombstone_retention": "720h0m0s", "admins": "", "legacy_table_owner": "anonymous",
		"maintain_interval": "never", "clean_interval": "never", "executor": 256.0, "wait_max": "1m30s",
		"session_ttl_max": "2m0s", "sessions_max": 64.0, "principal_sessions_max": 16.0, "principal_inflight_max": 64.0,
		"max_body": float64(1 << 20), "request_timeout": "1m40s", "header_timeout": "5s", "write_timeout": "1m45s",
		"idle_timeout": "2m0s", "shutdown_timeout": "30s", "checkpoint_bytes": float64(64 << 20), "value_log": true,
		"wal_segment_bytes": float64(8 << 20), "wal_no_preallocate": false, "map_checkpoints": true, "separate_decide": true, "log_level": "info", "log_format": "json", "store": "local",
		"tls": "off (plain HTTP)", "etcd_shards": "none",
	}
	set := p.wait("idemd: settings")
	for k, v := range want {
		if set[k] != v {
			t.Errorf("setting %s = %v (%T), want %v", k, set[k], set[k], v)
		}
	}
	if len(set) != len(want)+3 { // time, level, msg
		t.Errorf("settings line has fields beyond the ones checked: %v", set)
	}
	rec := p.wait("idemd: recovered")
	for k, v := range map[string]any{"checkpoint": 0.0, "chain_bytes": 0.0, "mapped_bytes": 0.0} {
		if rec[k] != v {
			t.Errorf("recovered %s = %v, want %v", k, rec[k], v)
		}
	}
	for _, k := range []string{"keys", "applied", "replayed_entries", "replayed_bytes"} {
		if n, _ := rec[k].(float64); n <= 0 {
			t.Errorf("recovered %s = %v, want a positive count", k, rec[k])
		}
	}
	for _, k := range []string{"open_engine", "open_receipts", "open_total", "open_log", "open_chain", "open_replay"} {
		checkDuration(t, rec, "recovered", k)
	}
	if p.wait("idemd: listening")["owner"] != "node-0#2" {
		t.Fatalf("second start's owner:\n%s", p.logs)
	}
	// The receipts are counted once it serves: a report, not a step of the
	// start.
	counted := p.wait("idemd: receipts counted")
	for k, v := range map[string]any{
		"receipts_pending": 0.0, "receipts_started": float64(started), "receipts_terminal": 1.0,
		"receipts_with_debt": 0.0, "receipts_to_adopt": float64(started), "receipts_unreadable": 0.0,
		"receipts_partial": false, "sessions_open": 0.0,
	} {
		if counted[k] != v {
			t.Errorf("receipts counted: %s = %v, want %v", k, counted[k], v)
		}
	}
	checkDuration(t, counted, "receipts counted", "count_receipts")
}

// checkDuration fails t unless the log line rec, msg, has a Go duration
// in field k.
func checkDuration(t *testing.T, rec map[string]any, msg, k string) {
	t.Helper()
	if s, _ := rec[k].(string); s == "" {
		t.Errorf("%s: %s = %v, want a duration", msg, k, rec[k])
	} else if _, err := time.ParseDuration(s); err != nil {
		t.Errorf("%s: %s: %v", msg, k, err)
	}
}

// TestLogger_DurationsAreGoStrings: both formats write a duration as Go
// writes it, not the JSON handler's integer nanoseconds.
func TestLogger_DurationsAreGoStrings(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var out bytes.Buffer
		log := newLogger(config{logLevel: "info", logFormat: format}, &out)
		log.Info("m", "took", 1500*time.Millisecond, "nested", map[string]any{"n": 1}, "n", 7)
		log.WithGroup("g").Info("m", "wait", 2*time.Minute)
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if format == "text" {
			if !strings.Contains(lines[0], "took=1.5s") || !strings.Contains(lines[1], "g.wait=2m0s") {
				t.Fatalf("text:\n%s", out.String())
			}
			continue
		}
		var a struct {
			Took string
			N    int
		}
		var b struct{ G struct{ Wait string } }
		if json.Unmarshal([]byte(lines[0]), &a) != nil || json.Unmarshal([]byte(lines[1]), &b) != nil ||
			a.Took != "1.5s" || a.N != 7 || b.G.Wait != "2m0s" {
			t.Fatalf("json:\n%s", out.String())
		}
	}
}

// TestRun_TakenPortBurnsNoIncarnation: idemd listens before it opens the
// store: a start on a taken port fails naming the address, creates no data
// directory and, on an existing one, leaves the incarnation alone — the
// next start is the very next incarnation.
func TestRun_TakenPortBurnsNoIncarnation(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	data := filepath.Join(t.TempDir(), "data")
	refused := func() {
		t.Helper()
		p := tryRun(t, "-addr", addr, "-data", data)
		<-p.exited
		if p.err == nil || !strings.Contains(p.err.Error(), "-addr "+addr+": listen tcp "+addr) || exitCode(p.err) != 1 {
			t.Fatalf("start on a taken port: %v (exit %d)", p.err, exitCode(p.err))
		}
		if strings.Contains(p.logs.String(), "receipt: service open") {
			t.Fatalf("the receipt service opened:\n%s", p.logs)
		}
	}
	refused()
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("a data directory was created: %v", err)
	}
	for _, want := range []string{"node-0#1", "node-0#2"} {
		p := startRun(t, "-addr", "127.0.0.1:0", "-data", data)
		if owner := p.wait("idemd: listening")["owner"]; owner != want {
			t.Fatalf("owner %v, want %s", owner, want)
		}
		if err := p.stop(); err != nil {
			t.Fatal(err)
		}
		refused()
	}
}

// TestVersionLine_NamesEveryFormat: idemd -version prints, after the
// build, each format this build writes and every version it reads, as
// docs/upgrading.md tells operators to check before an upgrade.
func TestVersionLine_NamesEveryFormat(t *testing.T) {
	out := versionLine()
	if !strings.HasPrefix(out, "idemd ") {
		t.Fatalf("-version: %q", out)
	}
	for _, f := range allFormats() {
		want := f.Name + " "
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), want) {
				line = l
			}
		}
		if line == "" || !strings.Contains(line, "writes "+f.Writes+" ") || !strings.HasSuffix(line, "reads "+strings.Join(f.Reads, " ")) {
			t.Errorf("-version has no line %q writes %s reads %v:\n%s", f.Name, f.Writes, f.Reads, out)
		}
	}
}
