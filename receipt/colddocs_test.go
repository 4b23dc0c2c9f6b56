package receipt_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/engine/check"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs/memfs"
)

// coldDocsN documents are inserted by the cold-document tests, each well
// above the size the value log takes (receipt/cold.go).
const coldDocsN = 6

// insertColdDocs inserts coldDocsN documents of about 120 bytes through
// keyed batches, as idemd's request path does.
func insertColdDocs(t *testing.T, svc *receipt.Service) {
	t.Helper()
	pad := strings.Repeat("x", 100)
	for i := range coldDocsN {
		b := mustBatch(t, fmt.Sprintf(`{"inserts":[{"id":"d%d","doc":{"n":%d,"pad":%q}}]}`, i, i, pad))
		if a := mustExecute(t, svc, req(alice, "t", fmt.Sprintf("k%d", i), b)); a.Status != 201 {
			t.Fatalf("insert d%d: status %d %s", i, a.Status, a.Message)
		}
	}
}

// documents returns every document item of the store: key, value and
// version, values read (from the value log if there).
func documents(t *testing.T, db *engine.DB) []store.Item {
	t.Helper()
	items, err := db.Scan(ctx, store.NSTable.Prefix(), store.PrefixEnd(store.NSTable.Prefix()), store.ScanLimitMax)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// coldDocuments counts the documents kept in the value log.
func coldDocuments(t *testing.T, db *engine.DB) int {
	t.Helper()
	_, cold, _, err := db.ScanHot(ctx, store.NSTable.Prefix(), store.PrefixEnd(store.NSTable.Prefix()), store.ScanLimitMax)
	if err != nil {
		t.Fatal(err)
	}
	return cold
}

// shown describes items briefly: key@version and the value's length.
func shown(items []store.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = fmt.Sprintf("%s@%d(%dB)", it.Key, it.Version, len(it.Value))
	}
	return out
}

func sameItems(a, b []store.Item) bool {
	return slices.EqualFunc(a, b, func(x, y store.Item) bool {
		return string(x.Key) == string(y.Key) && string(x.Value) == string(y.Value) && x.Version == y.Version
	})
}

// TestColdDocuments_LeaveRAMAtACheckpointAndStayUsable: documents not
// rewritten since a checkpoint are in the value log after it, read back
// the same, and a transform of one — a read of its value and a write
// conditioned on its version — commits, before and after a reopen.
func TestColdDocuments_LeaveRAMAtACheckpointAndStayUsable(t *testing.T) {
	e := newEnv(t)
	svc := e.open(receipt.Options{})
	createTable(t, svc, "t")
	insertColdDocs(t, svc)
	if n := coldDocuments(t, e.db); n != 0 {
		t.Fatalf("%d documents cold before any checkpoint, want 0", n)
	}
	want := documents(t, e.db)
	if err := e.db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if n := coldDocuments(t, e.db); n != coldDocsN {
		t.Fatalf("%d documents cold after a checkpoint, want %d", n, coldDocsN)
	}
	if got := documents(t, e.db); !sameItems(got, want) {
		t.Fatalf("documents read back from the value log differ:\n got %v\nwant %v", shown(got), shown(want))
	}
	inc := mustBatch(t, `{"transforms":[{"id":"d0","ops":[{"op":"$inc","path":"n","value":5}]}]}`)
	if a := mustExecute(t, svc, req(alice, "t", "inc1", inc)); a.Status != 201 {
		t.Fatalf("transform of a cold document: status %d %s", a.Status, a.Message)
	}
	if n := coldDocuments(t, e.db); n != coldDocsN-1 {
		t.Fatalf("%d documents cold after one was rewritten, want %d", n, coldDocsN-1)
	}
	svc.Close()
	e.crash()
	svc = e.open(receipt.Options{})
	if got := counter(t, svc, "t", "d0"); got != 5 {
		t.Fatalf("d0's n = %d after the transform and a reopen, want 5", got)
	}
	if a := mustExecute(t, svc, req(alice, "t", "inc2", inc)); a.Status != 201 {
		t.Fatalf("transform after a reopen: status %d %s", a.Status, a.Message)
	}
	if got := counter(t, svc, "t", "d1"); got != 1 {
		t.Fatalf("d1's n = %d read from the value log after a reopen, want 1", got)
	}
}

// TestColdDocuments_ACrashAtEveryCallOfTheirCheckpointLosesNone: a power
// loss at each mutating file-system call of the checkpoint that moves the
// documents to the value log (appends, fsyncs, the checkpoint file, its
// rename), with nothing unsynced surviving, leaves every document with its
// value and version, and a store whose next checkpoint moves them.
func TestColdDocuments_ACrashAtEveryCallOfTheirCheckpointLosesNone(t *testing.T) {
	const callsMax = 200 // far more than one checkpoint makes: the loop ends first
	for n := int64(1); ; n++ {
		if n > callsMax {
			t.Fatalf("the checkpoint still crashed at call %d", callsMax)
		}
		e := newEnv(t)
		svc := e.open(receipt.Options{})
		createTable(t, svc, "t")
		insertColdDocs(t, svc)
		want := documents(t, e.db)
		svc.Close()
		fs := e.disk.FS()
		fs.CrashAt(n)
		err := e.db.Checkpoint()
		if !fs.Crashed() {
			if err != nil {
				t.Fatalf("checkpoint without a crash: %v", err)
			}
			t.Logf("a crash at each of the checkpoint's %d mutating calls lost nothing", n-1)
			return
		}
		e.crashKeeping(nil)
		e.openDB()
		if got := documents(t, e.db); !sameItems(got, want) {
			t.Fatalf("crash at call %d: documents\n got %v\nwant %v", n, shown(got), shown(want))
		}
		if err := e.db.Checkpoint(); err != nil {
			t.Fatalf("crash at call %d: checkpoint after the reopen: %v", n, err)
		}
		if c := coldDocuments(t, e.db); c != coldDocsN {
			t.Fatalf("crash at call %d: %d documents cold after the next checkpoint, want %d", n, c, coldDocsN)
		}
		if got := documents(t, e.db); !sameItems(got, want) {
			t.Fatalf("crash at call %d: documents after the next checkpoint\n got %v\nwant %v", n, shown(got), shown(want))
		}
		e.db.Close()
	}
}

// TestColdDocuments_OutliveTheCollectorABackupAndACheck: documents in the
// value log keep their values and versions while the collector moves them
// (most of their segments' records rewritten), a backup carries them, and
// the offline check reads every one back, on the store and on the backup.
func TestColdDocuments_OutliveTheCollectorABackupAndACheck(t *testing.T) {
	const docs, rewritten = 30, 20
	e := &env{t: t, disk: memfs.NewDisk(), clock: lease.NewSim(t0)}
	// Small segments, manual checkpoints, each a new base (a collected
	// segment is removed once the bases move past it): the first
	// checkpoint fills several segments, and the rewrites leave them
	// mostly dead.
	opts := engine.Options{Logger: quiet, FS: e.disk.FS(), ColdValue: receipt.ColdValue,
		ValueLogSegmentBytes: 1 << 10, CheckpointLogBytes: -1, CheckpointDeltasMax: -1}
	db, err := engine.Open("/data", opts)
	if err != nil {
		t.Fatal(err)
	}
	e.db = db
	t.Cleanup(func() { e.db.Close() })
	svc := e.open(receipt.Options{})
	createTable(t, svc, "t")
	pad := strings.Repeat("y", 100)
	for i := range docs {
		b := mustBatch(t, fmt.Sprintf(`{"inserts":[{"id":"d%d","doc":{"n":0,"pad":%q}}]}`, i, pad))
		mustExecute(t, svc, req(alice, "t", fmt.Sprintf("k%d", i), b))
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	inc := mustBatch(t, `{"transforms":[{"id":"d0","ops":[{"op":"$inc","path":"n","value":1}]}]}`)
	for i := range rewritten {
		inc.Transforms[0].ID = fmt.Sprintf("d%d", i)
		mustExecute(t, svc, req(alice, "t", fmt.Sprintf("inc%d", i), inc))
	}
	want := documents(t, db)
	// The collector runs after each checkpoint; a segment it empties goes
	// two links later, once a base stands past them: a write between the
	// checkpoints moves the base on.
	for i := range 4 {
		if _, err := db.Apply(ctx, new(store.Batch).Put(store.NSMeta.Key("test-tick"), []byte{byte(i)})); err != nil {
			t.Fatal(err)
		}
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	vl := db.Stats().ValueLog
	if vl.Collected == 0 {
		t.Fatalf("value log %+v: the collector removed no segment; the test proves nothing", vl)
	}
	if got := documents(t, db); !sameItems(got, want) {
		t.Fatalf("documents after the collector ran (%+v):\n got %v\nwant %v", vl, shown(got), shown(want))
	}
	if n := coldDocuments(t, db); n != docs {
		t.Fatalf("%d documents cold, want all %d", n, docs)
	}
	if _, err := db.Backup("/backup"); err != nil {
		t.Fatal(err)
	}
	svc.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"/data", "/backup"} {
		rep, err := check.Dir(e.disk.FS(), dir, check.Options{})
		if err != nil || rep.Damaged() || rep.ValueLog.Values < docs {
			t.Fatalf("check %s: %v; value log %+v, damaged %v; want every document read back", dir, err, rep.ValueLog, rep != nil && rep.Damaged())
		}
		copyOpts := opts
		db, err := engine.Open(dir, copyOpts)
		if err != nil {
			t.Fatal(err)
		}
		got := documents(t, db)
		db.Close()
		if !sameItems(got, want) {
			t.Fatalf("documents opened from %s:\n got %v\nwant %v", dir, shown(got), shown(want))
		}
	}
}
