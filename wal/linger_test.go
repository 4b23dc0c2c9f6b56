package wal

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/idemdb/idem/internal/testsupport"
)

// setLinger replaces how the writer judges the cores and waits (under mu,
// which the writer holds when it reads them).
func (l *Log) setLinger(busy func() bool, wait func(time.Duration)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.coresBusy, l.lingerWait = busy, wait
}

// lingerScene puts the writer before a group that holds one entry (b): the
// idle log's first append writes itself with its fsync held, b queues
// behind it, and releasing that fsync hands the writer b's group. It
// returns b and the release.
func lingerScene(t *testing.T, gl *gatedLog) (b *pending, release func()) {
	t.Helper()
	gl.gate.hold(true)
	first := gl.enqueue(t, []byte("first"))
	h := gl.gate.next(t)
	b = gl.enqueue(t, []byte("b"))
	return b, func() {
		gl.gate.hold(false)
		close(h.release)
		first.acked(t)
	}
}

// While the cores are busy the writer holds the next group open, and what
// is enqueued meanwhile goes out with it: one group, one fsync, for three
// appends that arrived one after another.
func TestLinger_WhileTheCoresAreBusyAGroupTakesWhatArrivesMeanwhile(t *testing.T) {
	gl := openGated(t, Options{})
	lingering, resume := make(chan time.Duration), make(chan struct{})
	gl.setLinger(func() bool { return true }, func(d time.Duration) {
		lingering <- d
		<-resume
	})
	b, release := lingerScene(t, gl)
	release()
	var d time.Duration
	select {
	case d = <-lingering:
	case <-time.After(testsupport.Patience):
		t.Fatal("the writer did not linger before b's group")
	}
	before := gl.Stats() // the first append's group is done: the writer is on b's
	if d != DefaultGroupLinger {
		t.Errorf("lingered for %v, want the default %v", d, DefaultGroupLinger)
	}
	c, e := gl.enqueue(t, []byte("c")), gl.enqueue(t, []byte("e"))
	b.notYet(t, "while its group was held open")
	close(resume)
	for _, p := range []*pending{b, c, e} {
		p.acked(t)
	}
	after := gl.Stats()
	if groups, fsyncs := after.Groups-before.Groups, after.Fsyncs-before.Fsyncs; groups != 1 || fsyncs != 1 {
		t.Fatalf("three appends joined while the group lingered took %d groups and %d fsyncs, want 1 and 1", groups, fsyncs)
	}
	if after.Lingered != 1 {
		t.Fatalf("Stats.Lingered is %d, want 1 (b's group only)", after.Lingered)
	}
}

// With a core idle, or lingering turned off, the writer writes the group
// as it is at once: it never waits.
func TestLinger_NeverWaitsWithACoreIdleOrWhenOff(t *testing.T) {
	for _, tc := range []struct {
		name   string
		linger time.Duration
		busy   bool
	}{
		{"a core idle", 0, false},
		{"off", -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gl := openGated(t, Options{GroupLinger: tc.linger})
			var mu sync.Mutex
			waited := 0
			gl.setLinger(func() bool { return tc.busy }, func(time.Duration) {
				mu.Lock()
				waited++
				mu.Unlock()
			})
			b, release := lingerScene(t, gl)
			release()
			b.acked(t)
			mu.Lock()
			defer mu.Unlock()
			if waited != 0 || gl.Stats().Lingered != 0 {
				t.Fatalf("the writer lingered (%d waits, Stats.Lingered %d)", waited, gl.Stats().Lingered)
			}
		})
	}
}

// The judge of the cores: busy once goroutines queue for them two rounds
// deep, not busy once they are gone.
func TestCoreWatch_BusyWhileGoroutinesWaitForACore(t *testing.T) {
	w := newCoreWatch()
	eventually := func(want bool, what string) {
		t.Helper()
		deadline := time.Now().Add(testsupport.Patience)
		for w.busy() != want {
			if time.Now().After(deadline) {
				t.Fatalf("busy() never became %v %s", want, what)
			}
			runtime.Gosched()
		}
	}
	eventually(false, "in a quiet test")
	stop := make(chan struct{})
	var spinning sync.WaitGroup
	for range 4 * runtime.GOMAXPROCS(0) {
		spinning.Add(1)
		go func() {
			defer spinning.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	eventually(true, "with four goroutines spinning per core")
	close(stop)
	spinning.Wait()
	eventually(false, "once they stopped")
}
