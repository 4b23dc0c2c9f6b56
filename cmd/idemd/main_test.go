package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/apitest"
)

// runTimeout bounds every wait on an in-process run (start, stop). It
// ends only a failing test, so it is generous for a loaded machine.
const runTimeout = apitest.StartTimeout

// logSink collects what run logs and wakes whoever waits for a line.
type logSink struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced at every write
}

func newLogSink() *logSink { return &logSink{changed: make(chan struct{})} }

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	close(l.changed)
	l.changed = make(chan struct{})
	return len(p), nil
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// record is the first JSON log line whose msg is msg (nil: none yet).
func (l *logSink) record(msg string) (map[string]any, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range bytes.Split(l.buf.Bytes(), []byte("\n")) {
		var rec map[string]any
		if json.Unmarshal(line, &rec) == nil && rec["msg"] == msg {
			return rec, l.changed
		}
	}
	return nil, l.changed
}

// inProcess is run on its own goroutine, logging JSON into logs.
type inProcess struct {
	t      *testing.T
	cancel context.CancelFunc
	logs   *logSink
	exited chan struct{}
	err    error // run's result, once exited is closed
	addr   string
	d      chan *daemon // the started daemon, once
}

// startRun starts run with args after JSON logs and no background passes,
// and waits for its listening line.
func startRun(t *testing.T, args ...string) *inProcess {
	t.Helper()
	p := tryRun(t, args...)
	p.addr = p.wait("idemd: listening")["addr"].(string)
	return p
}

// tryRun starts run without waiting for anything.
func tryRun(t *testing.T, args ...string) *inProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &inProcess{t: t, cancel: cancel, logs: newLogSink(), exited: make(chan struct{}), d: make(chan *daemon, 1)}
	argv := append([]string{"-log-format", "json", "-maintain-interval", "-1s", "-clean-interval", "-1s"}, args...)
	prev := slog.Default()
	go func() {
		defer close(p.exited)
		p.err = runWatched(ctx, argv, io.Discard, p.logs, func(d *daemon) { p.d <- d })
	}()
	t.Cleanup(func() {
		cancel()
		<-p.exited
		slog.SetDefault(prev)
	})
	return p
}

// wait returns the first log record with msg, failing the test if run
// returns first or runTimeout passes.
func (p *inProcess) wait(msg string) map[string]any {
	p.t.Helper()
	deadline := time.NewTimer(runTimeout)
	defer deadline.Stop()
	for {
		rec, changed := p.logs.record(msg)
		if rec != nil {
			return rec
		}
		select {
		case <-changed:
		case <-p.exited:
			if rec, _ := p.logs.record(msg); rec != nil {
				return rec
			}
			p.t.Fatalf("run returned %v before logging %q\n%s", p.err, msg, p.logs)
		case <-deadline.C:
			p.t.Fatalf("no %q line within %v\n%s", msg, runTimeout, p.logs)
		}
	}
}

// daemon is the started daemon (startRun has waited for it to listen).
func (p *inProcess) daemon(t *testing.T) *daemon {
	t.Helper()
	select {
	case d := <-p.d:
		return d
	default:
		t.Fatal("run has not started a daemon")
		return nil
	}
}

// stop cancels run's context and returns run's result.
func (p *inProcess) stop() error {
	p.t.Helper()
	p.cancel()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(runTimeout):
		p.t.Fatalf("run did not return within %v of cancel\n%s", runTimeout, p.logs)
		return nil
	}
}

func TestParseFlags_RequestTimeoutCoversWaitMax(t *testing.T) {
	c, err := parseFlags([]string{"-wait-max", "90s", "-request-timeout", "30s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.requestTimeout != 100*time.Second {
		t.Fatalf("request timeout %v, want wait-max + 10s", c.requestTimeout)
	}
	c, err = parseFlags(nil, io.Discard)
	if err != nil || c.addr != "127.0.0.1:8420" || c.requestTimeout != 60*time.Second || c.waitMax != 30*time.Second {
		t.Fatalf("defaults %+v %v", c, err)
	}
}

// TestRun_RejectsBadConfiguration: configuration errors end run with an
// error before anything is opened; -h is flag.ErrHelp (exit 0 in main).
func TestRun_RejectsBadConfiguration(t *testing.T) {
	defer slog.SetDefault(slog.Default())
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	data := filepath.Join(dir, "data")
	missing := filepath.Join(dir, "missing")
	empty := write("empty", "# only a comment\n\n   \n# and another\n")
	// On etcd at an address nothing serves: the secret is read, and
	// refused, before anything is dialled.
	etcd := func(args ...string) []string {
		return append([]string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:1", "-advertise", "http://127.0.0.1:1"}, args...)
	}
	short := write("short", strings.Repeat("s", 31)+"\n")
	for _, c := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"-log-level", "loud"}, `-log-level "loud": must be debug, info, warn or error`, 2},
		{[]string{"-log-format", "xml"}, `-log-format "xml": must be text or json`, 2},
		{[]string{"-tokens", missing}, "-tokens " + missing + ": cannot open: no such file or directory", 1},
		{[]string{"-tokens", empty}, "-tokens " + empty + ": no principal:token line", 1},
		{[]string{"-tokens", write("bad", "alice\n")}, "line 1: want principal:token", 1},
		{[]string{"-tokens", write("dup", "# c\nalice:0123456789abcdef\n\nbob:0123456789abcdef\n")}, "line 4: token listed twice", 1},
		{[]string{"-tokens", write("short-token", "# c\nalice:0123456789abcdef\nbob:s3cret-0123456\n")}, `line 3: principal "bob": token shorter than 16 bytes`, 1},
		{[]string{"-no-such-flag"}, "not defined", 2},
		{etcd("-cluster-secret-file", missing), "-cluster-secret-file " + missing + ": cannot open: no such file or directory", 1},
		{etcd("-cluster-secret-file", short), "-cluster-secret-file " + short + ": 31 bytes, want at least 32", 1},
		{etcd("-cluster-secret-file", write("huge", strings.Repeat("h", 5000))), "longer than 4096 bytes", 1},
	} {
		err := run(context.Background(), append(c.args, "-data", data), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) || exitCode(err) != c.code {
			t.Errorf("%v: %v (exit %d), want %q (exit %d)", c.args, err, exitCode(err), c.want, c.code)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%v: the error prints a token: %v", c.args, err)
		}
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("a data directory was created: %v", err)
	}
	if err := run(context.Background(), []string{"-h"}, io.Discard, io.Discard); !errors.Is(err, flag.ErrHelp) || exitCode(err) != 0 {
		t.Fatalf("-h: %v", err)
	}
}

// TestRun_RefusesUnknownFailpoint: a build with failpoints will not
// start with a GO_FAILPOINTS naming one it does not have (it would arm
// nothing), and says which; it exits 2, as for a bad flag, before anything
// is opened. (That known names start is fault.TestCheckEnv_RefusesUnknownNames
// and every test that arms one in a child idemd.)
func TestRun_RefusesUnknownFailpoint(t *testing.T) {
	if !fault.Compiled {
		t.Skip("the release build has no failpoints: GO_FAILPOINTS does nothing")
	}
	defer slog.SetDefault(slog.Default())
	t.Setenv(fault.EnvVar, fault.WALSyncBefore+`=return("eio");x/y=panic`)
	data := filepath.Join(t.TempDir(), "data")
	// Canceled: were the name let through, run would stop at once rather
	// than serve until the test's deadline.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := run(ctx, []string{"-data", data, "-addr", "127.0.0.1:0"}, io.Discard, io.Discard)
	want := `GO_FAILPOINTS names unknown failpoint "x/y"; known: `
	if err == nil || !strings.HasPrefix(err.Error(), want) || exitCode(err) != 2 {
		t.Fatalf("run: %v (exit %d), want %q… (exit 2)", err, exitCode(err), want)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("a data directory was created: %v", err)
	}
}

// TestRun_ServesUntilCanceled runs the server in-process on an ephemeral
// port, checks it answers, and stops it by canceling its context: run
// returns nil after a clean stop.
func TestRun_ServesUntilCanceled(t *testing.T) {
	p := startRun(t, "-addr", "127.0.0.1:0", "-data", t.TempDir())
	c := apitest.NewClient(t, "http://"+p.addr)
	c.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	c.Do("POST", "/v1/tables/t/batch", `{"deletes":["a"]}`, "Idempotency-Key", "k").JSON(t, 201, nil)
	c.CloseIdleConnections()
	if err := p.stop(); err != nil {
		t.Fatalf("run: %v\n%s", err, p.logs)
	}
	if !strings.Contains(p.logs.String(), `"msg":"idemd: stopped cleanly"`) {
		t.Fatalf("no clean stop:\n%s", p.logs)
	}
}
