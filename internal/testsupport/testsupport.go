// Package testsupport holds the helpers every package's tests share: arming
// a failpoint for one test (Arm), waiting for a condition with a deadline
// (Poll, Eventually), a benchmark's CPU per op (ReportCPU), and a dir's
// files as hashes, to prove an operation changed nothing (DirHashes). Tests never sleep to wait on anything: they poll, and
// the deadline only bounds how long a broken test takes to fail.
//
// It is test support: only _test.go files import it.
package testsupport

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
)

// Patience is the deadline for something that must happen soon: far beyond
// what it takes on a loaded two-core machine under -race, so that it bounds
// a hang without ever failing a healthy run.
const Patience = 30 * time.Second

// Arm enables the named failpoint with pingcap/failpoint terms (for example
// `1*return("eio")`) for the rest of the test, and returns its disarm, which
// also runs at cleanup. It
//   - skips the test when failpoints are compiled out (-tags nofailpoint):
//     an armed failpoint would silently do nothing there;
//   - fails the test for a name missing from fault's catalog (it would arm
//     nothing the code evaluates) and when Enable fails;
//   - disarms exactly once, however often disarm is called (a second
//     fault.Disable must not run: see fault's
//     TestDisable_TwiceKeepsOtherFailpointsArmed), and fails the test when
//     Disable fails.
func Arm(t testing.TB, name, terms string) (disarm func()) {
	t.Helper()
	RequireFailpoints(t)
	if !slices.Contains(fault.Names(""), name) {
		t.Fatalf("arm %s: not a failpoint of fault's catalog", name)
	}
	if err := fault.Enable(name, terms); err != nil {
		t.Fatalf("arm %s=%s: %v", name, terms, err)
	}
	var once sync.Once
	disarm = func() {
		once.Do(func() {
			if err := fault.Disable(name); err != nil {
				t.Errorf("disarm %s: %v", name, err)
			}
		})
	}
	t.Cleanup(disarm)
	return disarm
}

// RequireFailpoints skips the test when failpoints are compiled out
// (-tags nofailpoint), for a test that arms them by other means than Arm
// (GO_FAILPOINTS in a child process) or needs them from its first line.
func RequireFailpoints(t testing.TB) {
	t.Helper()
	if !fault.Compiled {
		t.Skip("failpoints compiled out (-tags nofailpoint)")
	}
}

// Poll calls cond until it reports true, and fails the test ("timed out
// waiting for <what>") if deadline passes first. cond runs on the caller's
// goroutine, so it may call t's methods.
func Poll(t testing.TB, what string, deadline time.Duration, cond func() bool) {
	t.Helper()
	if !Eventually(deadline, cond) {
		t.Fatalf("timed out after %v waiting for %s", deadline, what)
	}
}

// Eventually calls cond until it reports true (true) or deadline passes
// (false, after one last call). It fails nothing: the caller says what went
// wrong, with whatever it observed.
func Eventually(deadline time.Duration, cond func() bool) bool {
	end := time.Now().Add(deadline)
	step := minStep
	for !cond() {
		if !time.Now().Before(end) {
			return cond()
		}
		time.Sleep(step) // poll step, bounded by the deadline
		step = min(2*step, maxStep)
	}
	return true
}

// The poll step starts short, so that a condition about to hold (a timer
// parked on a simulated clock) costs microseconds, and backs off so that a
// long wait does not spin.
const (
	minStep = 50 * time.Microsecond
	maxStep = 2 * time.Millisecond
)

// MustPanic runs fn and fails the test unless it panics with a message
// containing want: the check of an invariant assertion.
func MustPanic(t testing.TB, want string, fn func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic, want one naming %q", want)
		}
		if msg := fmt.Sprint(r); !strings.Contains(msg, want) {
			t.Fatalf("panic %q, want one naming %q", msg, want)
		}
	}()
	fn()
}
