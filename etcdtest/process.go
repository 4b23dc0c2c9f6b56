package etcdtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// process is a member running as a process of its own (Options.
// MemberBinary): RunMember on the other end of its pipes. It reports its
// state on stdout and logs on stderr; its stdin stays open as long as this
// side wants it, so that it dies with the test binary whatever kills that.
type process struct {
	cmd   *exec.Cmd
	stdin io.Closer

	serving, ready chan struct{} // closed when it says so
	exited         chan struct{} // closed once it has exited and its pipes are drained
	lead           atomic.Uint64 // term<<1 | 1 if it leads

	mu   sync.Mutex
	tail []string // its last lines of log, to explain an early exit
}

// tailLines is how much of a member's log an error about it quotes.
const tailLines = 5

func startProcess(bin string, s memberSpec, l *testLog) (server, error) {
	spec, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	p := &process{cmd: exec.Command(bin, string(spec)), serving: make(chan struct{}),
		ready: make(chan struct{}), exited: make(chan struct{})}
	stdin, err1 := p.cmd.StdinPipe()
	stdout, err2 := p.cmd.StdoutPipe()
	stderr, err3 := p.cmd.StderrPipe()
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			return nil, err
		}
	}
	p.stdin = stdin
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	var pipes sync.WaitGroup
	pipes.Go(func() { p.readState(stdout) })
	pipes.Go(func() { p.readLog(stderr, l) })
	go func() {
		pipes.Wait() // before Wait, which closes the pipes
		p.cmd.Wait()
		close(p.exited)
	}()
	t := time.NewTimer(readyTimeout)
	defer t.Stop()
	select {
	case <-p.serving:
		return p, nil
	case <-p.exited:
		return nil, p.exitError("exited before serving")
	case <-t.C:
		crash(p)
		return nil, fmt.Errorf("not serving after %v", readyTimeout)
	}
}

// readState follows what RunMember reports: "serving", "ready", and
// "lead <0|1> <term>" at each change.
func (p *process) readState(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 1 && f[0] == "serving":
			close(p.serving)
		case len(f) == 1 && f[0] == "ready":
			close(p.ready)
		case len(f) == 3 && f[0] == "lead":
			term, _ := strconv.ParseUint(f[2], 10, 63)
			v := term << 1
			if f[1] == "1" {
				v |= 1
			}
			p.lead.Store(v)
		}
	}
}

func (p *process) readLog(r io.Reader, l *testLog) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		l.Write([]byte(line))
		p.mu.Lock()
		p.tail = append(p.tail, line)
		if len(p.tail) > tailLines {
			p.tail = p.tail[1:]
		}
		p.mu.Unlock()
	}
}

// exitError says why the member exited: its last lines of log, where an
// address in use shows as such (isAddrInUse).
func (p *process) exitError(what string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Errorf("%s (%v): %s", what, p.cmd.ProcessState, strings.Join(p.tail, "\n"))
}

func (p *process) awaitReady(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.ready:
		return nil
	case <-p.exited:
		return p.exitError("exited before ready")
	case <-t.C:
		return fmt.Errorf("not ready after %v", timeout)
	}
}

func (p *process) leads() (bool, uint64) {
	v := p.lead.Load()
	return v&1 == 1, v >> 1
}

func (p *process) stopped() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// halt kills the process: a crash, which it may have had already.
func (p *process) halt() { p.cmd.Process.Kill() }

func (p *process) close() {
	<-p.exited
	p.stdin.Close()
}
