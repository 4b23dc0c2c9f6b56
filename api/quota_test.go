package api_test

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// beginHTTP begins a session of ttl seconds as c; it returns the answer
// and, on 201, the session's ID.
func beginHTTP(t *testing.T, c *apitest.Client, ttl int) (*apitest.Response, string) {
	t.Helper()
	r := c.Do("POST", "/v1/sessions", fmt.Sprintf(`{"ttl_seconds":%d}`, ttl))
	if r.Status != 201 {
		return r, ""
	}
	var s struct {
		ID string `json:"session_id"`
	}
	r.JSON(t, 201, &s)
	return r, s.ID
}

// wantQuota429 checks r is 429 overloaded with Retry-After retryAfter
// ("": any) and a detail that says whose limit was hit and names none of
// names.
func wantQuota429(t *testing.T, r *apitest.Response, retryAfter, says string, names ...string) {
	t.Helper()
	p := r.Problem(t, 429)
	checkProblem(t, p, "overloaded", 429, true, "same_key")
	if got := r.Header.Get("Retry-After"); got == "" || (retryAfter != "" && got != retryAfter) {
		t.Fatalf("Retry-After %q, want %q", got, retryAfter)
	}
	if !strings.Contains(p.Detail, says) {
		t.Fatalf("detail %q, want it to say %q", p.Detail, says)
	}
	for _, name := range names {
		if strings.Contains(p.Detail, name) {
			t.Fatalf("detail %q names %s", p.Detail, name)
		}
	}
}

// refused reads idem_refused_total{kind} from /metrics, and fails if the
// family has any label but kind.
func refused(t *testing.T, n *node, kind string) string {
	t.Helper()
	body := string(n.c.Do("GET", "/metrics", nil).Body)
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "idem_refused_total{") && !regexp.MustCompile(`^idem_refused_total\{kind="[a-z_]+"\} `).MatchString(line) {
			t.Fatalf("a refusal series with other labels: %s", line)
		}
	}
	m := regexp.MustCompile(`(?m)^idem_refused_total\{kind="` + kind + `"\} (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no idem_refused_total{kind=%q}", kind)
	}
	return m[1]
}

// TestQuota_SessionsPerPrincipalOverHTTP: a principal at its quota of
// open sessions gets 429 with its own earliest session expiry as
// Retry-After, while the other principal begins sessions — each way
// round — and the refusals are counted by kind, without principals.
func TestQuota_SessionsPerPrincipalOverHTTP(t *testing.T) {
	t.Parallel()
	clock := lease.NewSim(time.Unix(1_700_000_000, 0))
	n := newNode(t, config{tokens: tokens, clock: clock, sessionsMax: 8, principalSessions: 2})
	clients := map[string]*apitest.Client{"alice": n.c.WithToken("tok-alice"), "bob": n.c.WithToken("tok-bob")}
	ttls := map[string][2]int{"alice": {60, 20}, "bob": {45, 90}}
	want := map[string]string{"alice": "20", "bob": "45"} // each one's own earliest expiry
	open := map[string][]string{}
	for _, pair := range [][2]string{{"alice", "bob"}, {"bob", "alice"}} {
		flooder, other := pair[0], pair[1]
		for len(open[flooder]) < 2 {
			r, id := beginHTTP(t, clients[flooder], ttls[flooder][len(open[flooder])])
			if id == "" {
				t.Fatalf("%s begins: %d %s", flooder, r.Status, r.Body)
			}
			open[flooder] = append(open[flooder], id)
		}
		r, _ := beginHTTP(t, clients[flooder], 60)
		wantQuota429(t, r, want[flooder], "this principal has 2 sessions open on this node, its quota", other)
		// The other one is served, at its quota's edge or below it.
		if r, id := beginHTTP(t, clients[other], 30); id == "" {
			if len(open[other]) < 2 {
				t.Fatalf("%s begins while %s is at its quota: %d %s", other, flooder, r.Status, r.Body)
			}
		} else {
			clients[other].Do("DELETE", "/v1/sessions/"+id, nil).JSON(t, 200, nil)
		}
	}
	// An ended session's place is free again.
	clients["alice"].Do("DELETE", "/v1/sessions/"+open["alice"][0], nil).JSON(t, 200, nil)
	if r, id := beginHTTP(t, clients["alice"], 60); id == "" {
		t.Fatalf("alice begins after ending one: %d %s", r.Status, r.Body)
	}
	// Three: each flooder once, and alice once more as bob flooded (she
	// was at her quota too).
	if got := refused(t, n, "principal_sessions"); got != "3" {
		t.Fatalf("principal_sessions refusals %s, want 3", got)
	}
	if got := refused(t, n, "node_sessions"); got != "0" {
		t.Fatalf("node_sessions refusals %s, want 0", got)
	}
}

// TestQuota_NodeSessionsLimitOverHTTP: the node-wide limit still refuses
// a principal below its quota, saying it is the node's limit, with the
// earliest expiry on the node as Retry-After.
func TestQuota_NodeSessionsLimitOverHTTP(t *testing.T) {
	t.Parallel()
	clock := lease.NewSim(time.Unix(1_700_000_000, 0))
	n := newNode(t, config{tokens: tokens, clock: clock, sessionsMax: 2, principalSessions: 1})
	for tok, ttl := range map[string]int{"tok-alice": 50, "tok-bob": 30} {
		if r, id := beginHTTP(t, n.c.WithToken(tok), ttl); id == "" {
			t.Fatalf("%s begins: %d %s", tok, r.Status, r.Body)
		}
	}
	r, _ := beginHTTP(t, n.c.WithToken("tok-carol"), 60)
	wantQuota429(t, r, "30", "sessions are open on this node, its limit", "alice", "bob")
	if got := refused(t, n, "node_sessions"); got != "1" {
		t.Fatalf("node_sessions refusals %s, want 1", got)
	}
}

// TestQuota_InflightPerPrincipalOverHTTP: a principal with its quota of
// keyed requests in flight (one executing, held at its decision write,
// one waiting for it with Prefer: wait) is refused 429 with no
// transaction bound, while the other principal's keyed batches and
// sessions go through — each way round — and nothing stays counted once
// the requests are done.
func TestQuota_InflightPerPrincipalOverHTTP(t *testing.T) {
	t.Parallel()
	gs := &gateStore{}
	n := newNode(t, config{tokens: tokens, executorMax: 8, principalInflight: 2, separateDecide: true, // held between two writes
		wrap: func(s store.Store) store.Store { gs.Store = s; return gs }})
	clients := map[string]*apitest.Client{"alice": n.c.WithToken("tok-alice"), "bob": n.c.WithToken("tok-bob")}
	for _, c := range clients {
		c.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	}
	for round, pair := range [][2]string{{"alice", "bob"}, {"bob", "alice"}} {
		flooder, other := clients[pair[0]], clients[pair[1]]
		busy := fmt.Sprintf("busy-%d", round)
		release := gs.hold(store.NSTxn.Key("dec", receipt.Bind(pair[0], "t", busy)))
		first := goRequest(flooder, busy)
		gs.waitHeld(t)
		second := goRequest(flooder, busy, "Prefer", "wait=30")
		testsupport.Poll(t, pair[0]+"'s two requests in flight", testsupport.Patience, func() bool {
			u, _ := n.svc.Usage(pair[0])
			return u.Inflight == 2
		})
		r := flooder.Do("POST", "/v1/tables/t/batch", incBody, "Idempotency-Key", "over")
		wantQuota429(t, r, "", "this principal has 2 requests in progress on this node, its quota", pair[1])
		checkUnbound(t, r, r.Problem(t, 429))
		r, _ = beginHTTP(t, flooder, 60)
		wantQuota429(t, r, "", "its quota", pair[1])
		// The other principal is served meanwhile.
		other.Do("POST", "/v1/tables/t/batch", incBody, "Idempotency-Key", busy).JSON(t, 201, nil)
		if r, id := beginHTTP(t, other, 60); id == "" {
			t.Fatalf("%s begins while %s is at its quota: %d %s", pair[1], pair[0], r.Status, r.Body)
		} else {
			other.Do("DELETE", "/v1/sessions/"+id, nil).JSON(t, 200, nil)
		}
		release()
		checkReleasedPause(t, recv(t, first))
		checkReleasedPause(t, recv(t, second))
		flooder.Do("POST", "/v1/tables/t/batch", incBody, "Idempotency-Key", "over").JSON(t, 201, nil)
	}
	if got := refused(t, n, "principal_inflight"); got != "4" {
		t.Fatalf("principal_inflight refusals %s, want 4", got)
	}
	for _, p := range []string{"alice", "bob"} {
		if u, k := n.svc.Usage(p); u.Inflight != 0 || u.Sessions != 0 || k != 0 {
			t.Fatalf("%s's usage %+v (%d principals) once every request is done", p, u, k)
		}
	}
}

// gateStore holds the Apply that writes one key until released.
type gateStore struct {
	store.Store
	mu      sync.Mutex
	key     []byte
	gate    chan struct{}
	entered chan struct{}
}

// Capabilities implements store.Store: none, as the embedded interface
// alone would not hide them (its Capabilities would be the inner store's,
// around this wrapper).
func (s *gateStore) Capabilities() store.Capabilities { return store.Capabilities{} }

// hold makes the next Apply that writes key wait until release.
func (s *gateStore) hold(key []byte) (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key, s.gate, s.entered = key, make(chan struct{}), make(chan struct{})
	gate := s.gate
	var once sync.Once
	return func() { once.Do(func() { close(gate) }) }
}

func (s *gateStore) waitHeld(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	entered := s.entered
	s.mu.Unlock()
	select {
	case <-entered:
	case <-time.After(testsupport.Patience):
		t.Fatal("timed out waiting for the held write")
	}
}

func (s *gateStore) Apply(ctx context.Context, b *store.Batch) (store.Version, error) {
	s.mu.Lock()
	var gate chan struct{}
	for _, op := range b.Ops {
		if s.key != nil && !op.Delete && bytes.Equal(op.Key, s.key) {
			gate, s.key = s.gate, nil
			close(s.entered)
			break
		}
	}
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return s.Store.Apply(ctx, b)
}

// goRequest sends a keyed batch on table t as c, in the background.
func goRequest(c *apitest.Client, key string, headers ...string) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		r, err := c.Try("POST", "/v1/tables/t/batch", incBody, append([]string{"Idempotency-Key", key}, headers...)...)
		ch <- answer{r, err}
	}()
	return ch
}
