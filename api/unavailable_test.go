package api_test

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemdb/idem/store"
)

// unreachableStore is a store whose reads fail with store.ErrUnavailable
// while cut is set: a remote store (etcd) that did not answer in time.
type unreachableStore struct {
	store.Store
	cut atomic.Bool
}

// Capabilities implements store.Store: none, as the embedded interface
// alone would not hide them (its Capabilities would be the inner store's,
// around this wrapper).
func (s *unreachableStore) Capabilities() store.Capabilities { return store.Capabilities{} }

func (s *unreachableStore) Get(ctx context.Context, key []byte) (store.Item, error) {
	if s.cut.Load() {
		return store.Item{}, store.ErrUnavailable
	}
	return s.Store.Get(ctx, key)
}

// storeRefusals reads idem_store_refusals_total{cause=cause}.
func storeRefusals(t *testing.T, n *node, cause string) string {
	t.Helper()
	body := string(n.c.Do("GET", "/metrics", nil).Body)
	m := regexp.MustCompile(`(?m)^idem_store_refusals_total\{cause="` + cause + `"\} (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no idem_store_refusals_total{cause=%q}:\n%s", cause, body)
	}
	return m[1]
}

// TestUnavailable_ATransientLossIsNotCalledAStop: a store that did not
// answer in time (store.ErrUnavailable, as etcd's store says of a reset
// connection or a deadline) is answered 503 unavailable, counted under
// cause unreachable, and logged at WARN as a loss the node rides out —
// never as "the store refuses writes until idemd restarts", which would
// send an operator to restart a healthy node. Once it answers again the
// same node commits, with no restart.
func TestUnavailable_ATransientLossIsNotCalledAStop(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	us := &unreachableStore{}
	n := newNode(t, config{logger: slog.New(slog.NewTextHandler(&logs, nil)),
		wrap: func(s store.Store) store.Store { us.Store = s; return us }})
	n.createTable("t")

	us.cut.Store(true)
	const refusals = 5
	for i := range refusals {
		r := n.batch("t", "k"+string(rune('a'+i)), `{"inserts":[{"id":"a","doc":{}}]}`)
		checkProblem(t, r.Problem(t, 503), "unavailable", 503, true, "same_key")
	}
	us.cut.Store(false)
	n.batch("t", "after", `{"inserts":[{"id":"a","doc":{}}]}`).JSON(t, 201, nil)

	out := logs.String()
	if strings.Contains(out, "until idemd restarts") {
		t.Fatalf("a transient loss was logged as a stop:\n%s", out)
	}
	if got := strings.Count(out, `level=WARN msg="api: the store did not answer in time`); got != 1 {
		t.Fatalf("the loss was logged %d times at WARN, want once:\n%s", got, out)
	}
	if got := storeRefusals(t, n, "unreachable"); got != "5" {
		t.Fatalf("unreachable refusals %s, want %d", got, refusals)
	}
	if got := storeRefusals(t, n, "stopped"); got != "0" {
		t.Fatalf("stopped refusals %s, want 0", got)
	}
}
