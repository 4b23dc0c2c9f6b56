package receipt_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/receipt"
)

const bob = "bob"

// overloaded returns err as a 429 overloaded *code.Error, or fails.
func overloaded(t *testing.T, err error, what string) *code.Error {
	t.Helper()
	var ce *code.Error
	if !errors.As(err, &ce) || ce.Code != code.Overloaded {
		t.Fatalf("%s: %v, want 429 overloaded", what, err)
	}
	return ce
}

// beginFor begins a session of principal that lives ttl, or fails.
func beginFor(t *testing.T, svc *receipt.Service, principal string, ttl time.Duration) receipt.Session {
	t.Helper()
	s, err := svc.BeginSession(ctx, principal, ttl)
	if err != nil {
		t.Fatalf("%s begins: %v", principal, err)
	}
	return s
}

// wantIdle fails unless no principal holds anything of its quotas.
func wantIdle(t *testing.T, svc *receipt.Service) {
	t.Helper()
	for _, p := range []string{alice, bob} {
		if u, n := svc.Usage(p); u != (receipt.PrincipalUsage{}) || n != 0 {
			t.Fatalf("%s's usage %+v, %d principals counted; want nothing once everything ended", p, u, n)
		}
	}
}

// TestQuota_SessionsPerPrincipal: a principal at its quota of open
// sessions is refused 429 with the earliest expiry of its own sessions as
// Retry-After (on the service's clock), while the other principal still
// begins sessions — each way round; ending a session gives its place
// back, and once every session ended nothing is counted.
func TestQuota_SessionsPerPrincipal(t *testing.T) {
	e := newEnv(t)
	svc := e.open(receipt.Options{SessionsOpenMax: 8, SessionsPerPrincipalMax: 2})
	// Each principal's earliest expiry differs, so that an answer computed
	// from the other's sessions (or from the wall clock) shows.
	ttls := map[string][2]time.Duration{alice: {time.Minute, 20 * time.Second}, bob: {40 * time.Second, 3 * time.Minute}}
	open := map[string][]receipt.Session{}
	for _, pair := range [][2]string{{alice, bob}, {bob, alice}} {
		flooder, other := pair[0], pair[1]
		for len(open[flooder]) < 2 {
			open[flooder] = append(open[flooder], beginFor(t, svc, flooder, ttls[flooder][len(open[flooder])]))
		}
		before := svc.Stats().Refused[receipt.RefusedPrincipalSessions]
		for range 3 {
			ce := overloaded(t, func() error { _, err := svc.BeginSession(ctx, flooder, time.Minute); return err }(), flooder+" over its quota")
			if want := min(ttls[flooder][0], ttls[flooder][1]); ce.RetryAfter != want {
				t.Fatalf("%s's Retry-After %v, want %v: its own earliest session expiry", flooder, ce.RetryAfter, want)
			}
			if !strings.Contains(ce.Message, "this principal") || !strings.Contains(ce.Message, "its quota") || strings.Contains(ce.Message, other) {
				t.Fatalf("detail %q: must say the principal's quota was hit, and name no one", ce.Message)
			}
		}
		if got := svc.Stats().Refused[receipt.RefusedPrincipalSessions] - before; got != 3 {
			t.Fatalf("refusals counted %d, want 3", got)
		}
		// The other principal is served while the flooder is at its quota.
		if len(open[other]) == 0 {
			open[other] = append(open[other], beginFor(t, svc, other, ttls[other][0]))
		}
	}
	if u, _ := svc.Usage(alice); u.Sessions != 2 {
		t.Fatalf("alice's sessions %d, want 2", u.Sessions)
	}
	// Ending a session, by abort or by commit, frees its place.
	if _, err := svc.AbortSession(ctx, alice, open[alice][1].ID); err != nil {
		t.Fatal(err)
	}
	open[alice][1] = beginFor(t, svc, alice, time.Minute)
	for _, p := range []string{alice, bob} {
		for i, s := range open[p] {
			if i == 0 {
				if _, err := svc.CommitSession(ctx, receipt.CommitRequest{Principal: p, Session: s.ID}); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if _, err := svc.AbortSession(ctx, p, s.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	wantIdle(t, svc)
}

// TestQuota_NodeSessionsStillBound: below every principal's quota, the
// node's limit still refuses — saying it is the node's, naming no
// principal, with the earliest expiry of all sessions open here as
// Retry-After — and counts the refusal apart.
func TestQuota_NodeSessionsStillBound(t *testing.T) {
	e := newEnv(t)
	svc := e.open(receipt.Options{SessionsOpenMax: 3, SessionsPerPrincipalMax: 2})
	beginFor(t, svc, alice, time.Minute)
	beginFor(t, svc, alice, 50*time.Second)
	beginFor(t, svc, bob, 30*time.Second)
	_, err := svc.BeginSession(ctx, "carol", time.Minute)
	ce := overloaded(t, err, "a begin beyond the node's limit")
	if ce.RetryAfter != 30*time.Second {
		t.Fatalf("Retry-After %v, want 30s: the earliest expiry on the node", ce.RetryAfter)
	}
	if !strings.Contains(ce.Message, "its limit") || strings.Contains(ce.Message, alice) || strings.Contains(ce.Message, bob) {
		t.Fatalf("detail %q: must say the node's limit was hit, and name no one", ce.Message)
	}
	st := svc.Stats()
	if st.Refused[receipt.RefusedNodeSessions] != 1 || st.Refused[receipt.RefusedPrincipalSessions] != 0 {
		t.Fatalf("refusals %v, want one node_sessions", st.Refused)
	}
}

// flood holds InflightPerPrincipalMax (2, the default for 8 slots: a
// quarter) requests of principal in flight: one executing, blocked at its
// decision write, and one waiting for it with Prefer: wait. open lets
// them finish.
func flood(t *testing.T, svc *receipt.Service, hs *hookStore, principal string) (open func()) {
	t.Helper()
	key := "flood-" + principal
	g := hs.block(t, decisionKey(receipt.Bind(principal, "t-"+principal, key)))
	r := req(principal, "t-"+principal, key, incBatch(t, key, "ctr"))
	first := goExecute(svc, r)
	g.wait(t)
	r.Wait = time.Minute
	second := goExecute(svc, r)
	testsupport.Poll(t, principal+"'s two requests in flight", testsupport.Patience, func() bool {
		u, _ := svc.Usage(principal)
		return u.Inflight == 2
	})
	return func() {
		g.open()
		for _, ch := range []<-chan result{first, second} {
			if res := awaitResult(t, ch); res.err != nil || res.a.Outcome != receipt.OutcomeCommitted {
				t.Fatalf("a flooding request: %+v %v", res.a, res.err)
			}
		}
	}
}

// TestQuota_InflightPerPrincipal: a principal with its quota of requests
// in flight is refused at once, 429 with no receipt made and the
// executor's drain time as Retry-After, on keyed batches and session
// steps alike; the other principal's keyed batches and sessions go
// through — each way round; and once the flood completed, nothing is
// counted.
func TestQuota_InflightPerPrincipal(t *testing.T) {
	e := newEnv(t)
	hs := &hookStore{Store: e.db}
	svc := e.openOn(hs, twoWrites(receipt.Options{ExecutorMax: 8})) // flood holds requests between their two writes
	for _, p := range []string{alice, bob} {
		createTableFor(t, svc, p, "t-"+p)
	}
	for round, pair := range [][2]string{{alice, bob}, {bob, alice}} {
		flooder, other := pair[0], pair[1]
		open := flood(t, svc, hs, flooder)
		key := fmt.Sprintf("over-%d", round)
		ans := mustExecute(t, svc, req(flooder, "t-"+flooder, key, incBatch(t, key, "ctr")))
		if ans.Code != code.Overloaded || ans.TxnID != "" || ans.Outcome != "" || ans.RetryAfter < receipt.DrainRetryAfterMin {
			t.Fatalf("%s over its quota: %+v, want 429 with no receipt and a drain-time Retry-After", flooder, ans)
		}
		if !strings.Contains(ans.Message, "this principal") || strings.Contains(ans.Message, other) {
			t.Fatalf("detail %q: must say the principal's quota was hit, and name no one", ans.Message)
		}
		if receiptExists(t, e.db, receipt.Bind(flooder, "t-"+flooder, key)) {
			t.Fatal("a refused request left a receipt")
		}
		_, err := svc.BeginSession(ctx, flooder, time.Minute)
		overloaded(t, err, flooder+"'s session begin over its in-flight quota")
		// The other principal is served meanwhile.
		wantCommitted(t, mustExecute(t, svc, req(other, "t-"+other, key, incBatch(t, key, "ctr"))), receipt.Bind(other, "t-"+other, key), false)
		s := beginFor(t, svc, other, time.Minute)
		if _, err := svc.AbortSession(ctx, other, s.ID); err != nil {
			t.Fatal(err)
		}
		open()
		// And the flooder is served again once its requests are done.
		wantCommitted(t, mustExecute(t, svc, req(flooder, "t-"+flooder, key, incBatch(t, key, "ctr"))), receipt.Bind(flooder, "t-"+flooder, key), false)
	}
	if got := svc.Stats().Refused[receipt.RefusedPrincipalInflight]; got != 4 {
		t.Fatalf("principal_inflight refusals %d, want 4", got)
	}
	wantIdle(t, svc)
}

// TestQuota_CountsReturnToZero: a burst of concurrent keyed batches and
// sessions of two principals — some refused at their quotas, some
// refused on their merits (a missing table), some cut by a cancelled
// context — leaves nothing counted once it is over.
func TestQuota_CountsReturnToZero(t *testing.T) {
	e := newEnv(t)
	svc := e.open(receipt.Options{ExecutorMax: 8, SessionsPerPrincipalMax: 3})
	for _, p := range []string{alice, bob} {
		createTableFor(t, svc, p, "t-"+p)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	const burst = 64
	done := make(chan struct{}, burst)
	for i := range burst {
		p := []string{alice, bob}[i%2]
		key := fmt.Sprintf("k%d", i)
		b := incBatch(t, key, "ctr")
		go func() {
			defer func() { done <- struct{}{} }()
			switch i % 4 {
			case 0:
				_, _ = svc.Execute(ctx, req(p, "t-"+p, key, b))
			case 1:
				_, _ = svc.Execute(cancelled, req(p, "t-"+p, key, b))
			case 2:
				_, _ = svc.Execute(ctx, req(p, "missing", key, b))
			case 3:
				s, err := svc.BeginSession(ctx, p, time.Minute)
				if err != nil {
					return // refused at a quota
				}
				// A commit cut short leaves the session open: the abort
				// ends it (and answers session_committed otherwise).
				_, _ = svc.CommitSession(cancelled, receipt.CommitRequest{Principal: p, Session: s.ID})
				_, _ = svc.AbortSession(ctx, p, s.ID)
			}
		}()
	}
	for range burst {
		<-done
	}
	wantIdle(t, svc)
}
