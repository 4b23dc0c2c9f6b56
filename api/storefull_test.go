package api_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemdb/idem/store"
)

// fullStore says it is near its space quota while full is set (as
// etcdstore with a Space watcher does), and refuses puts as etcd's
// NOSPACE alarm does while noSpace is set.
type fullStore struct {
	store.Store
	full, noSpace atomic.Bool
}

// Capabilities implements store.Store: its space report, nothing of the
// inner store's (the embedded interface alone would forward the inner
// store's Capabilities, around this wrapper).
func (s *fullStore) Capabilities() store.Capabilities { return store.Capabilities{Space: s} }

func (s *fullStore) SpaceFull() bool { return s.full.Load() }

func (s *fullStore) Apply(ctx context.Context, b *store.Batch) (store.Version, error) {
	if s.noSpace.Load() {
		for _, op := range b.Ops {
			if !op.Delete {
				return 0, fmt.Errorf("%w: %w: etcdserver: mvcc: database space exceeded", store.ErrFailStopped, store.ErrNoSpace)
			}
		}
	}
	return s.Store.Apply(ctx, b)
}

// TestStoreFull_NewWorkWaitsWhatWasStartedFinishes: above the store's
// high-water mark a new key, an unkeyed batch and a new session are
// answered 503 store_full with Retry-After and nothing written, while a
// terminal receipt replays and a session begun before commits; the
// refusals are counted under cause full and logged without "restart".
// Once the store has room again the same node commits new keys.
func TestStoreFull_NewWorkWaitsWhatWasStartedFinishes(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	fs := &fullStore{}
	n := newNode(t, config{logger: slog.New(slog.NewTextHandler(&logs, nil)),
		wrap: func(s store.Store) store.Store { fs.Store = s; return fs }})
	n.createTable("t")
	done := n.batch("t", "done", `{"inserts":[{"id":"a","doc":{"v":1}}]}`)
	done.JSON(t, 201, nil)
	sess := n.beginSession(n.c)
	base := "/v1/sessions/" + sess.ID
	n.c.Do("POST", base+"/batch", `{"table":"t","inserts":[{"id":"s","doc":{"v":2}}]}`).JSON(t, 200, nil)

	fs.full.Store(true)
	r := n.batch("t", "new", `{"inserts":[{"id":"b","doc":{}}]}`)
	p := r.Problem(t, 503)
	checkProblem(t, p, "store_full", 503, true, "same_key")
	checkKeyed(t, r, p, "not_applied")
	if r.Header.Get("Retry-After") != "30" {
		t.Fatalf("store_full with Retry-After %q, want 30", r.Header.Get("Retry-After"))
	}
	n.noReceipt("t", "new")
	checkProblem(t, n.batch("t", "", `{"inserts":[{"id":"c","doc":{}}]}`).Problem(t, 503), "store_full", 503, true, "same_key")
	checkProblem(t, n.c.Do("POST", "/v1/sessions", nil).Problem(t, 503), "store_full", 503, true, "same_key")

	again := n.batch("t", "done", `{"inserts":[{"id":"a","doc":{"v":1}}]}`)
	if again.Status != 201 || !bytes.Equal(again.Body, done.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a replay while full: %d %s", again.Status, again.Body)
	}
	n.c.Do("POST", base+"/commit", nil).JSON(t, 201, nil)
	if d := n.doc("t", "s"); d["v"] != float64(2) {
		t.Fatalf("the session begun before committed %v", d)
	}
	if got := storeRefusals(t, n, "full"); got != "3" {
		t.Fatalf("full refusals %s, want 3", got)
	}

	fs.full.Store(false)
	n.batch("t", "new", `{"inserts":[{"id":"b","doc":{}}]}`).JSON(t, 201, nil)
	if out := logs.String(); strings.Contains(out, "restart") && !strings.Contains(out, "no restart needed") || strings.Contains(out, "until idemd restarts") {
		t.Fatalf("a full store was logged as needing a restart:\n%s", out)
	}
}

// TestStoreFull_TheNoSpaceAlarmIsStoreFullNotAStop: a write the store
// refused for want of space (etcd's NOSPACE alarm, which another writer
// may raise before the high-water mark is seen) answers 503 store_full,
// not "unavailable until idemd restarts"; replays go on, and once the
// alarm is cleared the same node commits the key, with no restart.
func TestStoreFull_TheNoSpaceAlarmIsStoreFullNotAStop(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	fs := &fullStore{}
	n := newNode(t, config{logger: slog.New(slog.NewTextHandler(&logs, nil)),
		wrap: func(s store.Store) store.Store { fs.Store = s; return fs }})
	n.createTable("t")
	n.batch("t", "done", `{"inserts":[{"id":"a","doc":{"v":1}}]}`).JSON(t, 201, nil)

	fs.noSpace.Store(true)
	r := n.batch("t", "k", `{"inserts":[{"id":"b","doc":{}}]}`)
	p := r.Problem(t, 503)
	checkProblem(t, p, "store_full", 503, true, "same_key")
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("store_full without Retry-After: %v", r.Header)
	}
	n.batch("t", "done", `{"inserts":[{"id":"a","doc":{"v":1}}]}`).JSON(t, 201, nil)
	if got := storeRefusals(t, n, "full"); got != "1" {
		t.Fatalf("full refusals %s, want 1", got)
	}

	fs.noSpace.Store(false)
	n.batch("t", "k", `{"inserts":[{"id":"b","doc":{}}]}`).JSON(t, 201, nil)
	if out := logs.String(); strings.Contains(out, "until idemd restarts") || strings.Contains(out, "api: request failed") {
		t.Fatalf("the alarm was logged as a stop or a failure:\n%s", out)
	}
}
