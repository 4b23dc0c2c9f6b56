package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs/memfs"
)

// Shared helpers of the engine tests. No engine test calls t.Parallel:
// failpoints are process-wide.

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// quiet silences the store's logging (fail-stops and repairs are expected
// in these tests; the assertions say what matters).
func quiet(o Options) Options {
	if o.Logger == nil {
		o.Logger = quietLogger
	}
	return o
}

// seedFor returns the seed of a randomized test: IDEM_TEST_SEED if set,
// otherwise the clock. It is printed whenever the test fails.
func seedFor(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("IDEM_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("IDEM_TEST_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d: rerun with IDEM_TEST_SEED=%d go test -race -run '^%s$' ./engine/", seed, seed, t.Name())
		}
	})
	return seed
}

// scanAll returns every item of the store by key, and checks that Get
// agrees with Scan on each of them.
func scanAll(t *testing.T, db *DB) map[string]store.Item {
	t.Helper()
	ctx := context.Background()
	items, err := db.Scan(ctx, nil, nil, store.ScanLimitMax)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	out := make(map[string]store.Item, len(items))
	var prev string
	for i, it := range items {
		k := string(it.Key)
		if i > 0 && k <= prev {
			t.Fatalf("scan out of order: %q after %q", k, prev)
		}
		prev = k
		out[k] = it
		got, err := db.Get(ctx, it.Key)
		if err != nil || string(got.Value) != string(it.Value) || got.Version != it.Version {
			t.Fatalf("Get(%q) = %q@%d, %v; Scan says %q@%d", k, got.Value, got.Version, err, it.Value, it.Version)
		}
	}
	return out
}

func sameState(t *testing.T, what string, got, want map[string]store.Item) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok || string(g.Value) != string(w.Value) || g.Version != w.Version {
			t.Errorf("%s: key %q = %q@%d (present %v), want %q@%d", what, k, g.Value, g.Version, ok, w.Value, w.Version)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected key %q = %q@%d", what, k, g.Value, g.Version)
		}
	}
}

// memDisk is a data directory on a crashable in-memory disk: a crash keeps
// exactly what was fsynced — file data, creations, renames, removals.
type memDisk struct{ *memfs.Disk }

const memDataDir = "/data"

func newMemDisk() memDisk { return memDisk{memfs.NewDisk()} }

// opts returns o on the disk as it is now.
func (d memDisk) opts(o Options) Options {
	o.FS = d.FS()
	return quiet(o)
}

func (d memDisk) open(t *testing.T, o Options) *DB {
	t.Helper()
	return openT(t, memDataDir, d.opts(o))
}

func (d memDisk) reopen(o Options) (*DB, error) { return Open(memDataDir, d.opts(o)) }

// seededTear keeps a random prefix of every unsynced append, as a torn
// write does; with zeroFill, the rest of the written length reads as
// zero-filled blocks instead of being gone.
func seededTear(rng *rand.Rand, zeroFill bool) memfs.Tear {
	return func(name string, off int64, b []byte) []byte {
		keep := rng.IntN(len(b) + 1)
		if zeroFill {
			return memfs.ZeroFill(keep, 4096)(name, off, b)
		}
		return b[:keep]
	}
}

// copyFixture copies the fixture data dir (testdata/vN…-dir) into a
// temporary one and returns it with the fixture's state: every key's
// "version value", from the testdata/vN…-state.json beside it.
func copyFixture(t *testing.T, fixture string) (string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(fixture)); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(strings.TrimSuffix(fixture, "-dir") + "-state.json")
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]string
	if err := json.Unmarshal(raw, &state); err != nil {
		t.Fatal(err)
	}
	return dir, state
}

// checkState fails the test unless db holds exactly state ("version
// value" by key).
func checkState(t *testing.T, what string, db *DB, state map[string]string) {
	t.Helper()
	got := scanAll(t, db)
	if len(got) != len(state) {
		t.Fatalf("%s: %d keys, want %d", what, len(got), len(state))
	}
	for k, it := range got {
		if s := fmt.Sprintf("%d %s", it.Version, it.Value); s != state[k] {
			t.Fatalf("%s: %q = %q, want %q", what, k, s, state[k])
		}
	}
}
