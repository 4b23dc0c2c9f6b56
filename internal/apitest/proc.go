package apitest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process-level test support: the real idemd binary, built once per test
// binary, started on a free loopback port and stopped by SIGKILL or SIGTERM.

// StartTimeout bounds how long a process may take to announce its address,
// answer /healthz once it has, or stop after SIGTERM. It only ends a test
// that fails anyway, so it is generous: a loaded 2-core machine running
// several test binaries has taken over 15 s to start a node on etcd.
const StartTimeout = 60 * time.Second

// EtcdDialBudget is the -etcd-dial-timeout that tests give a node on etcd
// (idemd's default, 5 s, is an operator's choice, and a loaded machine's
// TLS handshake and authentication have missed it). It is below
// StartTimeout, so that a cluster that never answers is reported by the
// node's own error, not by the test's deadline.
const EtcdDialBudget = 45 * time.Second

// build is one way of building ./cmd/idemd, done at most once per test
// binary.
type build struct {
	file string // name in the build directory
	pkg  string // the package built, "" for ./cmd/idemd
	tags string // -tags value, "" for none
	// noRace builds without the race detector even under -race.
	noRace bool
	once   sync.Once
	bin    string
	err    error
}

var (
	defaultBuild = &build{file: "idemd"}
	releaseBuild = &build{file: "idemd-release", tags: "nofailpoint", noRace: true}
	idemctlBuild = &build{file: "idemctl", pkg: "./cmd/idemctl"}

	buildMu  sync.Mutex
	buildDir string // shared by every build, created by the first
)

// BuildIdemd builds ./cmd/idemd once per test binary and returns its path.
// This is the test build: failpoints compiled in, armed only by an explicit
// GO_FAILPOINTS (see Launch). The child is race-enabled when the test binary
// is, so that it reuses the packages the test build already compiled. Call
// RemoveBuilds from TestMain after m.Run to delete the build directory.
func BuildIdemd(t testing.TB) string {
	t.Helper()
	return defaultBuild.get(t)
}

// BuildIdemdRelease builds ./cmd/idemd as `make build` does, with
// -tags nofailpoint (failpoints compiled out: GO_FAILPOINTS does nothing),
// once per test binary, and returns its path. Start it with StartBinary or
// tryLaunchBinary. It is never race-enabled: its code is the test build's
// but for the failpoints compiled out, and the test build runs under the
// race detector in every other process test; built so, it links the
// packages make test's release-build suite compiled (under -race it
// recompiled the module, most of cmd/idemd's test time there).
func BuildIdemdRelease(t testing.TB) string {
	t.Helper()
	return releaseBuild.get(t)
}

// BuildIdemctl builds ./cmd/idemctl once per test binary and returns its
// path, for tests of the operator's verbs against a live store.
func BuildIdemctl(t testing.TB) string {
	t.Helper()
	return idemctlBuild.get(t)
}

func (b *build) get(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			b.err = err
			return
		}
		dir, err := sharedBuildDir()
		if err != nil {
			b.err = err
			return
		}
		bin := filepath.Join(dir, b.file)
		args := []string{"build", "-o", bin}
		if raceEnabled && !b.noRace {
			args = append(args, "-race")
		}
		if b.tags != "" {
			args = append(args, "-tags", b.tags)
		}
		pkg := b.pkg
		if pkg == "" {
			pkg = "./cmd/idemd"
		}
		args = append(args, pkg)
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
			return
		}
		b.bin = bin
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

func sharedBuildDir() (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir == "" {
		dir, err := os.MkdirTemp("", "idemd-build-")
		if err != nil {
			return "", err
		}
		buildDir = dir
	}
	return buildDir, nil
}

// RemoveBuilds deletes what BuildIdemd and BuildIdemdRelease built (call it
// from TestMain once every test has finished).
func RemoveBuilds() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// Proc is one running idemd.
type Proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	addr   string
	logs   *logBuffer
	exited chan struct{}
	err    error // Wait's result, once exited is closed
}

// logBuffer collects a process's output; waiters learn of every write.
type logBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed (and replaced) at every write
}

func newLogBuffer() *logBuffer { return &logBuffer{changed: make(chan struct{})} }

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.changed)
	l.changed = make(chan struct{})
	return l.b.Write(p)
}

// look reports whether the logs contain s, and a channel closed at the next
// write.
func (l *logBuffer) look(s string) (bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Contains(l.b.Bytes(), []byte(s)), l.changed
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Start starts idemd (see Launch) and waits until /healthz answers 200
// through c (aimed at the new process).
func Start(t testing.TB, c *Client, data string, env []string, args ...string) *Proc {
	t.Helper()
	return StartBinary(t, c, BuildIdemd(t), data, env, args...)
}

// StartBinary is Start with the idemd binary bin (e.g. BuildIdemdRelease's).
func StartBinary(t testing.TB, c *Client, bin, data string, env []string, args ...string) *Proc {
	t.Helper()
	p, err := tryLaunchBinary(t, bin, data, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	p.WaitHealthy(c)
	return p
}

// WaitHealthy polls /healthz through c until it answers 200, failing the
// test after StartTimeout.
func (p *Proc) WaitHealthy(c *Client) {
	p.t.Helper()
	deadline := time.Now().Add(StartTimeout)
	for {
		r, err := c.WithBase(p.Base()).Try("GET", "/healthz", nil)
		if err == nil && r.Status == 200 {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("idemd /healthz did not answer 200 within %v: %v\n%s", StartTimeout, err, p.Logs())
		}
		select {
		case <-p.exited:
			p.t.Fatalf("idemd exited before /healthz answered: %v\n%s", p.err, p.Logs())
		case <-time.After(5 * time.Millisecond): // poll step, bounded by the deadline
		}
	}
}

// Launch starts idemd on a free loopback port with data directory data and
// returns as soon as it logs its address. Defaults: JSON logs, a 60 s lease
// TTL, no background recovery or cleaner pass (every state change is one
// the test caused; pass -maintain-interval to have one) and a 10 s
// shutdown timeout; args come after them and override them. env adds environment variables:
// GO_FAILPOINTS and GO_FAILPOINTS_HTTP are never inherited from the test's
// own environment, only passed explicitly.
func Launch(t testing.TB, data string, env []string, args ...string) *Proc {
	t.Helper()
	p, err := TryLaunch(t, data, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TryLaunch is Launch that returns an error, rather than failing the test,
// when the process exits before announcing its address (a failpoint may
// crash it while it starts); the exited process is then available from
// the error (see *EarlyExit).
func TryLaunch(t testing.TB, data string, env []string, args ...string) (*Proc, error) {
	t.Helper()
	return tryLaunchBinary(t, BuildIdemd(t), data, env, args...)
}

// tryLaunchBinary is TryLaunch with the idemd binary bin (e.g.
// BuildIdemdRelease's).
func tryLaunchBinary(t testing.TB, bin, data string, env []string, args ...string) (*Proc, error) {
	t.Helper()
	argv := append([]string{"-addr", "127.0.0.1:0", "-data", data, "-log-format", "json",
		"-lease-ttl", "60s", "-maintain-interval", "-1s", "-clean-interval", "-1s", "-shutdown-timeout", "10s"}, args...)
	cmd := exec.Command(bin, argv...)
	cmd.Env = childEnv(env)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &Proc{t: t, cmd: cmd, logs: newLogBuffer(), exited: make(chan struct{})}
	cmd.Stdout = p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrs := make(chan string, 1)
	go p.follow(stderr, addrs)
	t.Cleanup(p.cleanup)
	timer := time.NewTimer(StartTimeout)
	defer timer.Stop()
	select {
	case p.addr = <-addrs:
		return p, nil
	case <-p.exited:
		return nil, &EarlyExit{Proc: p}
	case <-timer.C:
		return nil, fmt.Errorf("idemd did not announce its address within %v\n%s", StartTimeout, p.logs.String())
	}
}

// childEnv is this process's environment for idemd without its failpoints
// (a test arms the child's through env), then env: later entries win.
func childEnv(env []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GO_FAILPOINTS=") && !strings.HasPrefix(kv, "GO_FAILPOINTS_HTTP=") {
			out = append(out, kv)
		}
	}
	if raceEnabled {
		// A race-enabled binary sleeps 1 s at exit by default (to catch
		// races at exit); every graceful stop would pay it.
		if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
			out = append(out, "GORACE="+strings.TrimSpace(g+" atexit_sleep_ms=0"))
		}
	}
	return append(out, env...)
}

// follow copies idemd's stderr into its logs, sends the address it
// announces listening on to addrs, and records its exit.
func (p *Proc) follow(stderr io.Reader, addrs chan<- string) {
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		p.logs.Write(append(append([]byte{}, line...), '\n'))
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg == "idemd: listening" {
			select {
			case addrs <- rec.Addr:
			default:
			}
		}
	}
	_, _ = io.Copy(p.logs, stderr) // a line longer than the scanner's buffer
	p.err = p.cmd.Wait()
	close(p.exited)
}

// cleanup kills idemd if it still runs, fails the test on a race report
// in its output, and shows its logs when the test failed.
func (p *Proc) cleanup() {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	if strings.Contains(p.logs.String(), "WARNING: DATA RACE") {
		// A killed race-enabled child never reaches its exit status
		// 66: its report is only in its output.
		p.t.Errorf("the race detector reported a data race in idemd %s", p.addr)
	}
	if p.t.Failed() {
		p.t.Logf("idemd %s logs:\n%s", p.addr, p.logs.String())
	}
}

// EarlyExit is TryLaunch's error for a process that exited before it
// announced its address.
type EarlyExit struct{ Proc *Proc }

func (e *EarlyExit) Error() string {
	return fmt.Sprintf("idemd exited before listening: %v\n%s", e.Proc.err, e.Proc.Logs())
}

// Base is the process's base URL.
func (p *Proc) Base() string { return "http://" + p.addr }

// Addr is the address the process listens on.
func (p *Proc) Addr() string { return p.addr }

// Logs is everything the process wrote so far (stdout and stderr).
func (p *Proc) Logs() string { return p.logs.String() }

// Exited is closed once the process has exited and its output is read.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// State is the exited process's state (nil while it runs).
func (p *Proc) State() *os.ProcessState {
	select {
	case <-p.exited:
		return p.cmd.ProcessState
	default:
		return nil
	}
}

// WaitLog waits until the process's output contains s, up to timeout. It
// returns false on timeout, or if the process exited without writing s.
func (p *Proc) WaitLog(s string, timeout time.Duration) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		found, changed := p.logs.look(s)
		if found {
			return true
		}
		select {
		case <-changed:
		case <-p.exited:
			found, _ := p.logs.look(s) // every byte is in once exited is closed
			return found
		case <-timer.C:
			return false
		}
	}
}

// Signal sends sig to the process (SIGHUP: reload the tokens file).
func (p *Proc) Signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("%v: %v\n%s", sig, err, p.Logs())
	}
}

// Kill stops the process with SIGKILL (no shutdown code runs) and waits for
// it to exit.
func (p *Proc) Kill() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatalf("SIGKILL: %v\n%s", err, p.Logs())
	}
	<-p.exited
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		p.t.Fatalf("after SIGKILL: %v\n%s", p.cmd.ProcessState, p.Logs())
	}
}

// Term stops the process with SIGTERM and requires a clean, graceful exit
// (status 0 and the "idemd: stopped cleanly" log line).
func (p *Proc) Term() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("SIGTERM: %v\n%s", err, p.Logs())
	}
	timer := time.NewTimer(StartTimeout)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		p.t.Fatalf("idemd did not exit within %v of SIGTERM\n%s", StartTimeout, p.Logs())
	}
	if p.err != nil {
		p.t.Fatalf("idemd exited with %v after SIGTERM\n%s", p.err, p.Logs())
	}
	if !strings.Contains(p.Logs(), `"msg":"idemd: stopped cleanly"`) {
		p.t.Fatalf("no clean-stop log line\n%s", p.Logs())
	}
}

// Err is the process's exit error (nil for status 0), once it has exited.
func (p *Proc) Err() error {
	select {
	case <-p.exited:
		return p.err
	default:
		return errors.New("apitest: idemd is still running")
	}
}

// WithFreshConnections returns a copy of c, with the same recorder, that
// opens a new connection for every request. A test that crashes the server
// mid-request needs it: net/http silently resends a request carrying an
// Idempotency-Key when a reused connection fails before the response
// arrives, so the test would see the retry's answer instead of the failure
// (and the retry would reach the dying process).
func (c *Client) WithFreshConnections() *Client {
	tr := &Transport{Rec: c.Tr.Rec, Base: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	cc := *c
	cc.Tr = tr
	cc.HTTP = &http.Client{Transport: tr, Timeout: c.HTTP.Timeout, CheckRedirect: c.HTTP.CheckRedirect}
	return &cc
}

// CloseIdleConnections closes c's idle keep-alive connections. Call it
// before stopping a server gracefully: http.Server.Shutdown waits up to 5 s
// for a connection that was opened but never carried a request (the client
// transport dials ahead and may park such a connection in its pool).
func (c *Client) CloseIdleConnections() {
	if tr, ok := c.Tr.Base.(*http.Transport); ok {
		tr.CloseIdleConnections()
	}
}

// FreeAddr returns a loopback host:port that was free a moment ago, for a
// process that must keep its address across restarts (or advertise it
// before it listens). Another process may take it first; tests accept
// that small race.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
