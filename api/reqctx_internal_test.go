package api

import (
	"context"
	"net/http/httptest"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

// The principal set in dispatch's context is the one every context the
// handler derives from it sees, without a copy of the request; the
// context still ends when its deadline's cancel runs. A request whose
// context dispatch did not make gets the principal the old way, and a
// principal already set is never overwritten.
func TestWithPrincipal_InPlaceAndSeenThroughDerivedContexts(t *testing.T) {
	base := httptest.NewRequest("GET", "/", nil)
	ctx, cancel := context.WithCancel(base.Context())
	r := base.WithContext(newRequestCtx(ctx, time.Hour))
	got := withPrincipal(r, "alice")
	if got != r {
		t.Fatal("a request dispatch made was copied")
	}
	type otherKey struct{}
	derived, stop := context.WithCancel(context.WithValue(got.Context(), otherKey{}, 1))
	defer stop()
	if p := principalOf(derived); p != "alice" {
		t.Fatalf("principal through derived contexts: %q", p)
	}
	if again := withPrincipal(got, "mallory"); principalOf(got.Context()) != "alice" || principalOf(again.Context()) != "mallory" {
		t.Fatalf("a second principal: the first became %q, the second %q", principalOf(got.Context()), principalOf(again.Context()))
	}
	cancel()
	select {
	case <-derived.Done():
	default:
		t.Fatal("a context derived from the request's did not end with it")
	}
	plain := httptest.NewRequest("GET", "/", nil)
	if p := withPrincipal(plain, "bob"); p == plain || principalOf(p.Context()) != "bob" || principalOf(plain.Context()) != "" {
		t.Fatalf("a request dispatch did not make: principal %q", principalOf(p.Context()))
	}
}

// dispatch's context, whose timer is armed only when something asks for
// Done, says what context.WithTimeout's would at every step: armed or not,
// before and past the deadline, with its parent cancelled, after dispatch
// ended it, and with a parent whose deadline is sooner. Time is synctest's.
func TestRequestCtx_AsWithTimeoutWhetherArmedOrNot(t *testing.T) {
	const timeout = time.Minute
	sleep := func(d time.Duration) step {
		return func(*testing.T, context.CancelFunc, func()) { time.Sleep(d) }
	}
	cancelParent := func(_ *testing.T, c context.CancelFunc, _ func()) { c() }
	ended := func(_ *testing.T, _ context.CancelFunc, end func()) { end() }
	for _, tc := range []struct {
		name         string
		parentWithin time.Duration // the parent's own deadline (0: none)
		steps        []step
	}{
		{name: "fresh"},
		{name: "before the deadline", steps: []step{sleep(timeout / 2)}},
		{name: "past the deadline", steps: []step{sleep(timeout + time.Second)}},
		{name: "parent cancelled", steps: []step{cancelParent}},
		{name: "ended", steps: []step{ended}},
		{name: "ended past the deadline", steps: []step{sleep(2 * timeout), ended}},
		{name: "ended then past the deadline", steps: []step{ended, sleep(2 * timeout)}},
		{name: "parent cancelled then ended", steps: []step{cancelParent, ended}},
		{name: "parent's deadline sooner", parentWithin: timeout / 4},
		{name: "parent's deadline sooner, passed", parentWithin: timeout / 4, steps: []step{sleep(timeout / 2)}},
		{name: "parent's deadline later, passed", parentWithin: 2 * timeout, steps: []step{sleep(timeout + time.Second)}},
	} {
		for _, armAt := range []int{-1, 0, len(tc.steps)} { // never, before the steps, after them
			t.Run(tc.name+"/armed at "+strconv.Itoa(armAt), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { compareWithTimeout(t, timeout, tc.parentWithin, tc.steps, armAt) })
			})
		}
	}
}

// step is one event of TestRequestCtx_AsWithTimeoutWhetherArmedOrNot:
// time passing, the parents cancelled, or the request's end.
type step func(t *testing.T, parentCancel context.CancelFunc, end func())

// compareWithTimeout runs steps on a WithTimeout context and a requestCtx
// over twin parents, asking the requestCtx for Done (arming it) before
// step armAt (-1: never), and compares what each says after every step.
func compareWithTimeout(t *testing.T, timeout, parentWithin time.Duration, steps []step, armAt int) {
	parent := func() (context.Context, context.CancelFunc) {
		if parentWithin > 0 {
			return context.WithTimeout(context.Background(), parentWithin)
		}
		return context.WithCancel(context.Background())
	}
	p1, cancel1 := parent()
	p2, cancel2 := parent()
	defer cancel1()
	defer cancel2()
	want, stop := context.WithTimeout(p1, timeout)
	defer stop()
	got := newRequestCtx(p2, timeout)
	check := func(when string) {
		t.Helper()
		synctest.Wait() // timers due now have fired
		wd, wok := want.Deadline()
		gd, gok := got.Deadline()
		if !wd.Equal(gd) || wok != gok || want.Err() != got.Err() {
			t.Fatalf("%s: deadline %v %v, err %v; want %v %v, %v", when, gd, gok, got.Err(), wd, wok, want.Err())
		}
		if armAt >= 0 && !isClosed(got.Done()) != !isClosed(want.Done()) {
			t.Fatalf("%s: Done closed %v, want %v", when, isClosed(got.Done()), isClosed(want.Done()))
		}
	}
	check("at the start")
	for i, s := range steps {
		if i == armAt {
			got.Done()
		}
		s(t, func() { cancel1(); cancel2() }, func() { stop(); got.end() })
		check("after step " + strconv.Itoa(i))
	}
	if armAt == len(steps) {
		got.Done()
	}
	check("at the end")
	if isClosed(got.Done()) != isClosed(want.Done()) || context.Cause(got) != context.Cause(want) {
		t.Fatalf("asked last: Done closed %v, cause %v; want %v, %v", isClosed(got.Done()), context.Cause(got), isClosed(want.Done()), context.Cause(want))
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A child of an unarmed context (as a handler derives one) arms it and
// ends with it, at the deadline or when dispatch ends the request.
func TestRequestCtx_ChildrenEndWithIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newRequestCtx(context.Background(), time.Minute)
		child, stop := context.WithCancel(c)
		defer stop()
		time.Sleep(time.Minute)
		synctest.Wait()
		if !isClosed(child.Done()) || child.Err() != context.DeadlineExceeded {
			t.Fatalf("child past the deadline: %v", child.Err())
		}
		c = newRequestCtx(context.Background(), time.Minute)
		child, stop = context.WithCancel(c)
		defer stop()
		c.end()
		if !isClosed(child.Done()) || child.Err() != context.Canceled {
			t.Fatalf("child after end: %v", child.Err())
		}
	})
}
