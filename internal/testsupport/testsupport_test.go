package testsupport

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
)

// recorder is a testing.TB that records what a helper reported instead of
// failing the real test; Fatalf and Skip end the helper's goroutine, as
// the real ones do.
type recorder struct {
	testing.TB
	fatal, errs, skip string
	cleanups          []func()
}

func (r *recorder) Helper()                        {}
func (r *recorder) Cleanup(f func())               { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(format string, a ...any) { r.errs += fmt.Sprintf(format, a...) + "\n" }
func (r *recorder) Fatalf(format string, a ...any) {
	r.fatal = fmt.Sprintf(format, a...)
	runtime.Goexit()
}
func (r *recorder) Skip(a ...any) { r.skip = fmt.Sprint(a...); runtime.Goexit() }
func (r *recorder) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// run calls f with a recorder on its own goroutine (so that Fatalf and Skip
// can end it) and returns the recorder once f has returned or exited.
func run(t *testing.T, f func(tb testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func TestArm_ArmsUntilDisarmedAndDisarmsOnce(t *testing.T) {
	if !fault.Compiled {
		r := run(t, func(tb testing.TB) { Arm(tb, fault.WALSyncBefore, `return("eio")`) })
		if r.skip == "" {
			t.Fatal("Arm did not skip a test with failpoints compiled out")
		}
		return
	}
	var disarm func()
	r := run(t, func(tb testing.TB) { disarm = Arm(tb, fault.WALSyncBefore, `return("eio")`) })
	if r.fatal != "" || r.skip != "" || len(r.cleanups) != 1 {
		t.Fatalf("Arm: fatal %q skip %q, %d cleanups", r.fatal, r.skip, len(r.cleanups))
	}
	if v, ok := fault.Eval(fault.WALSyncBefore); !ok || v != "eio" {
		t.Fatalf("armed failpoint evaluates to %v, %v", v, ok)
	}
	disarm()
	if _, ok := fault.Eval(fault.WALSyncBefore); ok {
		t.Fatal("disarmed failpoint still fires")
	}
	// A second disarm, then the cleanup, must not Disable again: that
	// would disarm a failpoint armed in between (fault's armed count).
	disarm()
	other := run(t, func(tb testing.TB) { Arm(tb, fault.WALWriteBefore, `return("x")`) })
	r.runCleanups()
	if _, ok := fault.Eval(fault.WALWriteBefore); !ok {
		t.Fatal("disarming one failpoint again disarmed another")
	}
	other.runCleanups()
	if _, ok := fault.Eval(fault.WALWriteBefore); ok {
		t.Fatal("cleanup did not disarm")
	}
	if r.errs != "" || other.errs != "" {
		t.Fatalf("errors: %s%s", r.errs, other.errs)
	}
}

func TestArm_RefusesUnknownNamesAndBadTerms(t *testing.T) {
	if !fault.Compiled {
		t.Skip("failpoints compiled out (-tags nofailpoint)")
	}
	if r := run(t, func(tb testing.TB) { Arm(tb, "wal/no-such-point", `return(1)`) }); !strings.Contains(r.fatal, "not a failpoint") {
		t.Fatalf("an unknown name: fatal %q", r.fatal)
	}
	r := run(t, func(tb testing.TB) { Arm(tb, fault.WALSyncBefore, `return(`) })
	if r.fatal == "" {
		t.Fatal("terms that do not parse armed")
	}
	if _, ok := fault.Eval(fault.WALSyncBefore); ok {
		t.Fatal("a failed Arm left the failpoint armed")
	}
}

func TestPoll_ReturnsOnceTrueAndFailsAtTheDeadline(t *testing.T) {
	calls := 0
	r := run(t, func(tb testing.TB) { Poll(tb, "three calls", Patience, func() bool { calls++; return calls == 3 }) })
	if r.fatal != "" || calls != 3 {
		t.Fatalf("fatal %q after %d calls", r.fatal, calls)
	}
	start := time.Now()
	r = run(t, func(tb testing.TB) { Poll(tb, "never", 5*time.Millisecond, func() bool { return false }) })
	if !strings.Contains(r.fatal, "waiting for never") {
		t.Fatalf("a condition that never holds: fatal %q", r.fatal)
	}
	if waited := time.Since(start); waited < 5*time.Millisecond {
		t.Fatalf("gave up after %v, before the deadline", waited)
	}
}

func TestEventually_ReportsWithoutFailing(t *testing.T) {
	if Eventually(time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds was reported true")
	}
	n := 0
	if !Eventually(Patience, func() bool { n++; return n > 5 }) || n != 6 {
		t.Fatalf("true after %d calls", n)
	}
	// The last call after the deadline counts.
	n = 0
	if !Eventually(0, func() bool { n++; return n == 2 }) {
		t.Fatal("the call at the deadline was not taken")
	}
}
