package main

// The crashloop suite's idemd processes: build, launch, kill, stop.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// moduleRoot is the directory of the idem (root) module, as the go command
// resolves it from the working directory: through go.work from the repo
// root (go run ./cmd/bench), through cmd/bench's replace for the test or a
// GOWORK=off build.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/idemdb/idem").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return "", fmt.Errorf("crashloop builds ./cmd/idemd: run the bench inside the idem repository (go run ./cmd/bench): go list -m github.com/idemdb/idem: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", errors.New("crashloop builds ./cmd/idemd: the idem module has no directory here (a downloaded version, not the repository's)")
	}
	return dir, nil
}

// buildIdemd builds the release server (failpoints compiled out, as make
// build does) into dir.
func buildIdemd(ctx context.Context, dir string) (string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "idemd")
	args := []string{"build", "-tags", "nofailpoint", "-o", bin, "./cmd/idemd"}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// crashLogs gathers what every idemd of the run logged at WARN or above,
// by message, for the report.
type crashLogs struct {
	mu     sync.Mutex
	counts map[string]int
}

func newCrashLogs() *crashLogs { return &crashLogs{counts: map[string]int{}} }

func (l *crashLogs) add(msg string) {
	l.mu.Lock()
	l.counts[msg]++
	l.mu.Unlock()
}

// summary is "msg×n; …", most frequent first; the warning every start
// without -tokens logs is left out.
func (l *crashLogs) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	type kv struct {
		msg string
		n   int
	}
	var all []kv
	for m, n := range l.counts {
		if !strings.HasPrefix(m, "auth: no -tokens file") {
			all = append(all, kv{m, n})
		}
	}
	slices.SortFunc(all, func(a, b kv) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(a.msg, b.msg)
	})
	var parts []string
	for _, e := range all {
		parts = append(parts, fmt.Sprintf("%q x%d", e.msg, e.n))
	}
	return strings.Join(parts, "; ")
}

// lineRing keeps a process's last lines of output, for error messages.
type lineRing struct {
	mu    sync.Mutex
	lines []string
	next  int
}

const ringLines = 40

func (r *lineRing) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) < ringLines {
		r.lines = append(r.lines, line)
		return
	}
	r.lines[r.next] = line
	r.next = (r.next + 1) % ringLines
}

func (r *lineRing) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append(slices.Clone(r.lines[r.next:]), r.lines[:r.next]...)
	return strings.Join(out, "\n")
}

// idemdProc is one running idemd.
type idemdProc struct {
	cmd    *exec.Cmd
	addr   string
	listen time.Duration // start to the listening line
	// opened is what the engine's open reported in the "idemd: recovered"
	// line (nil until it is logged).
	opened atomic.Pointer[openReport]
	start  time.Time
	tail   lineRing
	clean  atomic.Bool // logged "idemd: stopped cleanly"
	exited chan struct{}
	err    error // Wait's result, once exited is closed
}

func (p *idemdProc) base() string { return "http://" + p.addr }

// launchIdemd starts idemd on data and returns once it logged its address
// (after the engine's recovery: idemd opens the store before it listens).
func launchIdemd(ctx context.Context, bin, data, addr string, extra []string, logs *crashLogs) (*idemdProc, error) {
	args := append([]string{"-addr", addr, "-data", data, "-log-format", "json", "-log-level", "info",
		"-shutdown-timeout", "10s"}, extra...)
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GO_FAILPOINTS") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.SysProcAttr = childProcAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	p := &idemdProc{cmd: cmd, exited: make(chan struct{})}
	p.start = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			p.tail.add(string(line))
			var rec struct {
				Level string `json:"level"`
				Msg   string `json:"msg"`
				Addr  string `json:"addr"`
				openLine
			}
			if json.Unmarshal(line, &rec) != nil {
				continue
			}
			switch {
			case rec.Msg == "idemd: recovered":
				p.opened.Store(rec.openLine.report())
			case rec.Msg == "idemd: listening":
				select {
				case addrs <- rec.Addr:
				default:
				}
			case rec.Msg == "idemd: stopped cleanly":
				p.clean.Store(true)
			case rec.Level == "WARN" || rec.Level == "ERROR":
				logs.add(rec.Msg)
			}
		}
		_, _ = io.Copy(io.Discard, stderr) // a line longer than the buffer
		p.err = cmd.Wait()
		close(p.exited)
	}()
	timer := time.NewTimer(crashHealthyDeadline)
	defer timer.Stop()
	select {
	case p.addr = <-addrs:
		p.listen = time.Since(p.start)
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("idemd exited before listening (%v)\n%s", p.err, p.tail.String())
	case <-timer.C:
		err = fmt.Errorf("idemd did not listen within %v\n%s", crashHealthyDeadline, p.tail.String())
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.kill()
	return nil, err
}

// waitHealthy polls /healthz until it answers 200 and returns the time
// since the process started.
func (p *idemdProc) waitHealthy(ctx context.Context, c *http.Client) (time.Duration, error) {
	deadline := p.start.Add(crashHealthyDeadline)
	url := p.base() + "/healthz"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		resp, err := c.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(p.start), nil
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("idemd /healthz did not answer 200 within %v of its start (%v)\n%s", crashHealthyDeadline, err, p.tail.String())
		}
		select {
		case <-p.exited:
			return 0, fmt.Errorf("idemd exited before /healthz answered (%v)\n%s", p.err, p.tail.String())
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(crashHealthPoll):
		}
	}
}

// kill sends SIGKILL and waits for the exit, which must be that signal's:
// a process that died on its own is an error.
func (p *idemdProc) kill() error {
	select {
	case <-p.exited:
		return fmt.Errorf("idemd had already exited (%v)\n%s", p.err, p.tail.String())
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("SIGKILL: %w", err)
	}
	select {
	case <-p.exited:
	case <-time.After(crashStopTimeout):
		return fmt.Errorf("idemd did not exit within %v of SIGKILL", crashStopTimeout)
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && !(ws.Signaled() && ws.Signal() == syscall.SIGKILL) {
		return fmt.Errorf("idemd exited with %v, not by the SIGKILL\n%s", p.cmd.ProcessState, p.tail.String())
	}
	return nil
}

// term stops idemd gracefully and requires a clean exit: status 0 and
// "idemd: stopped cleanly".
func (p *idemdProc) term() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM: %w", err)
	}
	select {
	case <-p.exited:
	case <-time.After(crashStopTimeout):
		p.kill()
		return fmt.Errorf("idemd did not exit within %v of SIGTERM\n%s", crashStopTimeout, p.tail.String())
	}
	if p.err != nil || !p.clean.Load() {
		return fmt.Errorf("idemd did not stop cleanly after SIGTERM (%v)\n%s", p.err, p.tail.String())
	}
	return nil
}

func newHealthClient() *http.Client {
	return &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil, DisableCompression: true,
		DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}}
}

// createTable creates the clients' table (4 shards, the default).
func createTable(ctx context.Context, c *http.Client, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/v1/tables/"+crashTable, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("PUT /v1/tables/%s: %w", crashTable, err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT /v1/tables/%s: status %d: %s", crashTable, resp.StatusCode, body)
	}
	return nil
}
