package receipt_test

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/vfs/memfs"
	"github.com/idemdb/idem/wal"
	"github.com/idemdb/idem/wal/waltest"
)

// syncGate holds the first fsync of a WAL segment after it is armed: the
// test learns the log's writer reached it (entered) and lets it go (open),
// so that the keyed increments sent meanwhile queue up as the next group.
type syncGate struct {
	vfs.FS
	armed   atomic.Bool
	entered chan struct{}
	open    chan struct{}
}

func (g *syncGate) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil || filepath.Base(filepath.Dir(name)) != "wal" {
		return f, err
	}
	return gatedSync{f, g}, nil
}

type gatedSync struct {
	vfs.File
	g *syncGate
}

func (f gatedSync) Sync() error {
	if f.g.armed.CompareAndSwap(true, false) {
		f.g.entered <- struct{}{}
		<-f.g.open
	}
	return f.File.Sync()
}

// hotChainIncs is the length of the chain of keyed increments cut by
// TestHotCrash_ChainOfKeyedIncrementsCutAtEveryPrefix; hotChainStride the
// bytes between its cuts (below one increment's log entry, so that every
// prefix is some cut's).
const (
	hotChainIncs   = 5
	hotChainStride = 61
)

// TestHotCrash_ChainOfKeyedIncrementsCutAtEveryPrefix is issue 37's crash
// check at the receipt level: keyed batches that each insert a document
// and $inc one shared counter are chained — each staged on its
// predecessor's write while that one is not yet durable — into one group
// commit, whose fsync fails (power loss); the crash keeps a cut of the
// group's bytes. After recovery, at every cut: the receipts kept are the
// first ones of the chain; the counter equals how many were kept; each
// kept one replays its committed answer without applying again; nothing
// of a lost one is visible (no receipt, no document); and a retry of a
// lost one executes it once. Every prefix length is some cut's.
func TestHotCrash_ChainOfKeyedIncrementsCutAtEveryPrefix(t *testing.T) {
	testsupport.RequireFailpoints(t)
	seen := map[int]int{}
	_, unsynced := hotChainCut(t, 0)
	for _, keep := range waltest.CutPoints(unsynced, hotChainStride) {
		kept, _ := hotChainCut(t, keep)
		seen[kept]++
	}
	for n := 0; n <= hotChainIncs; n++ {
		if seen[n] == 0 {
			t.Errorf("no cut of the %d unsynced bytes kept exactly %d increments (kept by cut: %v)", unsynced, n, seen)
		}
	}
	t.Logf("%d unsynced bytes, increments kept by cut: %v", unsynced, seen)
}

func hotKey(i int) string { return fmt.Sprintf("hot-%d", i) }

// hotChainCut runs the chain, cuts its group after keep unsynced bytes,
// checks the recovered state and returns how many increments it kept.
func hotChainCut(t *testing.T, keep int) (kept, unsynced int) {
	e, g := gatedEnv(t)
	opts := receipt.Options{Node: "node-0"}
	a := e.open(opts)
	createTable(t, a, "t")
	wantCommitted(t, mustExecute(t, a, req(alice, "t", "base", incBatch(t, "base", "ctr"))), receipt.Bind(alice, "t", "base"), false)
	ctrKey := counterKey(t, e.db)

	// Hold the writer in the fsync of a group of its own, so that every
	// increment is sequenced behind it, into the next group.
	g.armed.Store(true)
	blocker := make(chan error, 1)
	go func() {
		_, err := e.db.Apply(ctx, new(store.Batch).Put([]byte("blocker"), []byte("x")))
		blocker <- err
	}()
	<-g.entered
	answers := make([]receipt.Answer, hotChainIncs)
	errs := make([]error, hotChainIncs)
	var wg sync.WaitGroup
	for i := range hotChainIncs {
		before := latestVersion(t, e.db, ctrKey)
		wg.Go(func() {
			answers[i], errs[i] = a.Execute(ctx, req(alice, "t", hotKey(i), incBatch(t, hotKey(i), "ctr")))
		})
		// The next one starts only once this one is sequenced, staged on
		// its predecessor's pending write: the chain's order is fixed.
		testsupport.Poll(t, fmt.Sprintf("increment %d sequenced on its pending predecessor", i), testsupport.Patience,
			func() bool { return latestVersion(t, e.db, ctrKey) > before })
	}
	disarm := testsupport.Arm(t, fault.WALSyncBefore, `return("power loss")`)
	close(g.open)
	if err := <-blocker; err != nil {
		t.Fatalf("the group before the chain: %v", err)
	}
	wg.Wait()
	disarm()
	for i, ans := range answers {
		if errs[i] != nil || ans.Terminal || ans.Code != "idempotency_receipt_pending" {
			t.Fatalf("increment %d, whose group's fsync failed: %+v, %v; want pending", i, ans, errs[i])
		}
	}
	a.Close()
	unsynced = e.crashKeeping(memfs.KeepUnsynced(keep))
	e.openDB()
	b := e.open(opts)
	kept = checkHotPrefix(t, e, b, keep)
	return kept, unsynced
}

// checkHotPrefix checks the recovered state of a cut chain, replays the
// kept increments, retries the lost ones, and returns how many were kept.
func checkHotPrefix(t *testing.T, e *env, b *receipt.Service, keep int) int {
	kept := 0
	for i := range hotChainIncs {
		has := receiptExists(t, e.db, receipt.Bind(alice, "t", hotKey(i)))
		if has && i != kept {
			t.Fatalf("cut at %d: receipt %d kept with only %d of its predecessors: not a prefix", keep, i, kept)
		}
		if vis := docExists(t, b, "t", "doc-"+hotKey(i)); vis != has {
			t.Fatalf("cut at %d: increment %d's document visible=%v, its receipt kept=%v", keep, i, vis, has)
		}
		if has {
			kept++
		}
	}
	if got := counter(t, b, "t", "ctr"); got != 1+kept {
		t.Fatalf("cut at %d: counter %d with %d receipts kept (and the base), want %d", keep, got, kept, 1+kept)
	}
	for i := range hotChainIncs {
		id := receipt.Bind(alice, "t", hotKey(i))
		wantCommitted(t, mustExecute(t, b, req(alice, "t", hotKey(i), incBatch(t, hotKey(i), "ctr"))), id, i < kept)
		wantCommitted(t, mustExecute(t, b, req(alice, "t", hotKey(i), incBatch(t, hotKey(i), "ctr"))), id, true)
	}
	if got := counter(t, b, "t", "ctr"); got != 1+hotChainIncs {
		t.Fatalf("cut at %d: after the retries the counter is %d, want %d", keep, got, 1+hotChainIncs)
	}
	return kept
}

// gatedEnv is newEnv on a disk whose WAL fsyncs a syncGate holds.
func gatedEnv(t *testing.T) (*env, *syncGate) {
	e := &env{t: t, disk: memfs.NewDisk(), clock: lease.NewSim(t0)}
	g := &syncGate{FS: e.disk.FS(), entered: make(chan struct{}, 1), open: make(chan struct{})}
	db, err := engine.Open("/data", engine.Options{Logger: quiet, FS: g, ColdValue: receipt.ColdValue, WAL: wal.Options{NoPreallocation: true}})
	if err != nil {
		t.Fatal(err)
	}
	e.db = db
	t.Cleanup(func() { e.db.Close() })
	return e, g
}

// counterKey is the engine key of the one document whose key names "ctr".
func counterKey(t *testing.T, db *engine.DB) []byte {
	t.Helper()
	var found []byte
	for k := range dump(t, db) {
		if strings.HasSuffix(k, "ctr") {
			if found != nil {
				t.Fatalf("two keys end in ctr: %q, %q", found, k)
			}
			found = []byte(k)
		}
	}
	if found == nil {
		t.Fatal("no key of the counter document")
	}
	return found
}

// latestVersion is the newest sequenced version of key, durable or not.
func latestVersion(t *testing.T, db *engine.DB, key []byte) store.Version {
	t.Helper()
	it, err := db.GetLatest(ctx, key)
	if err != nil {
		t.Fatalf("GetLatest %q: %v", key, err)
	}
	return it.Version
}
