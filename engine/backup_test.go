package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/wal"
)

// backupTestOpts: small log segments, parts and value-log segments, so a
// short load seals segments, writes chains and moves cold values.
func backupTestOpts() Options {
	return quiet(Options{CheckpointLogBytes: 16 << 10, CheckpointPartBytes: 2 << 10, CheckpointDeltasMax: 3,
		ValueLogSegmentBytes: 8 << 10, ColdValue: func(key, _ []byte) bool { return strings.HasPrefix(string(key), "rcpt/v1/") },
		WAL: wal.Options{SegmentBytes: 4 << 10}})
}

// ackedWrite is one acknowledged put.
type ackedWrite struct {
	key, value string
	version    store.Version
}

// stateAt is the store as of v: each key's last acknowledged put at or
// before it.
func stateAt(writes []ackedWrite, v store.Version) map[string]store.Item {
	out := map[string]store.Item{}
	for _, w := range writes {
		if w.version <= v && w.version >= out[w.key].Version {
			out[w.key] = store.Item{Key: []byte(w.key), Value: []byte(w.value), Version: w.version}
		}
	}
	return out
}

// checkBackup opens the backup dest and checks it holds exactly the
// acknowledged writes up to the manifest's version, after idemctl check's
// verification finds nothing damaged.
func checkBackup(t *testing.T, dest string, m BackupManifest, writes []ackedWrite) {
	t.Helper()
	if _, problems := checkDirT(t, dest); len(damageOf(problems)) != 0 {
		t.Fatalf("check finds damage in the backup: %+v", problems)
	}
	got, err := ReadBackupManifest(nil, dest)
	if err != nil || got.Version != m.Version || !got.VersionTime.Equal(m.VersionTime) {
		t.Fatalf("manifest = %+v, %v; Backup returned %+v", got, err, m)
	}
	db := openT(t, dest, backupTestOpts())
	defer db.Close()
	sameState(t, "the backup", scanAll(t, db), stateAt(writes, m.Version))
}

// TestBackup_UnderLoadHoldsExactlyTheWritesUpToItsVersion: a backup taken
// while writers apply batches and checkpoints, merges and value-log moves
// run is a store holding exactly the batches up to its manifest's version
// (none missing before it, none after it), which check passes; every
// batch acknowledged before Backup was called is in it.
func TestBackup_UnderLoadHoldsExactlyTheWritesUpToItsVersion(t *testing.T) {
	dir := t.TempDir()
	db := openT(t, dir, backupTestOpts())
	defer db.Close()
	var mu sync.Mutex
	var writes []ackedWrite
	put := func(i int) {
		k := string(store.NSTable.Key(fmt.Sprintf("k%03d", i%150)))
		if i%3 == 0 {
			k = string(store.NSReceipt.Key(fmt.Sprintf("%03d", i%90))) // cold: into the value log
		}
		val := fmt.Sprintf("v%d-%s", i, strings.Repeat("x", i%60))
		v, err := db.Apply(context.Background(), new(store.Batch).Put([]byte(k), []byte(val)))
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		writes = append(writes, ackedWrite{k, val, v})
		mu.Unlock()
	}
	for i := range 600 {
		put(i)
	}
	ackedBefore := scanAll(t, db)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := 1000 * (w + 1); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				put(i)
			}
		})
	}
	dest := filepath.Join(t.TempDir(), "b")
	m, err := db.Backup(dest)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if m.Linked == 0 || m.Linked == m.Files {
		t.Errorf("backup linked %d of %d files; want the sealed ones linked, the log's tail copied", m.Linked, m.Files)
	}
	for k, it := range ackedBefore {
		if it.Version > m.Version {
			t.Fatalf("key %q acknowledged at %d before the backup; backup ends at %d", k, it.Version, m.Version)
		}
	}
	checkBackup(t, dest, m, writes)
	if _, err := db.Backup(dest); !errors.Is(err, ErrBackupDest) {
		t.Fatalf("a second backup into the same dest: %v, want ErrBackupDest", err)
	}
}

// TestBackup_MidMergeHoldsTheState: a backup taken while a merge into a
// new base has written some of its parts (none linked) is the store's
// state, and the merge's parts it copied do not confuse its open.
func TestBackup_MidMergeHoldsTheState(t *testing.T) {
	dir := t.TempDir()
	opts := backupTestOpts()
	opts.CheckpointLogBytes = -1
	db := openT(t, dir, opts)
	defer db.Close()
	fillStore(t, db, 200)
	checkpointT(t, db)
	for range 3 {
		fillStore(t, db, 40)
		checkpointT(t, db)
	}
	if db.merges.merging == nil {
		t.Fatal("no merge due after CheckpointDeltasMax deltas")
	}
	if done, err := db.merges.mergeStep(); done || err != nil {
		t.Fatalf("first merge step: done %v, %v", done, err)
	}
	if len(db.merges.merging.parts) == 0 {
		t.Fatal("the merge wrote no part")
	}
	want := fillStore(t, db, 30)
	dest := filepath.Join(t.TempDir(), "b")
	m, err := db.Backup(dest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dest, partName(db.merges.merging.v0, 0))); err != nil {
		t.Fatalf("the merge's first part is not in the backup: %v", err)
	}
	back := openT(t, dest, opts)
	defer back.Close()
	sameState(t, "the backup taken mid-merge", scanAll(t, back), want)
	if back.durable != m.Version {
		t.Errorf("the backup opens at %d, manifest says %d", back.durable, m.Version)
	}
}

// TestBackupDir_RefusesALiveDirAndCopiesAStoppedOne: the offline form
// refuses a data dir a process holds (ErrLocked), and copies it once closed.
func TestBackupDir_RefusesALiveDirAndCopiesAStoppedOne(t *testing.T) {
	dir := t.TempDir()
	db := openT(t, dir, backupTestOpts())
	want := fillStore(t, db, 300)
	dest := filepath.Join(t.TempDir(), "b")
	if _, err := BackupDir(dir, dest, backupTestOpts()); !errors.Is(err, ErrLocked) {
		t.Fatalf("offline backup of a live dir: %v, want ErrLocked", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := BackupDir(dir, dest, backupTestOpts()); err != nil {
		t.Fatal(err)
	}
	back := openT(t, dest, backupTestOpts())
	defer back.Close()
	sameState(t, "the offline backup", scanAll(t, back), want)
}

// TestRestore_TheFirstOpenOfABackupRecordsTheEpochOnceAndRestartsKeepIt:
// the live store was never restored; the first open of its backup records
// a restore epoch naming the backup's version and time; a restart reads
// the same epoch (it is not re-armed); and a backup of the restored store
// carries no epoch of its own, so its restore records a new one.
func TestRestore_TheFirstOpenOfABackupRecordsTheEpochOnceAndRestartsKeepIt(t *testing.T) {
	db := openT(t, t.TempDir(), backupTestOpts())
	defer db.Close()
	fillStore(t, db, 50)
	if _, ok := db.Restored(); ok {
		t.Fatal("a store never restored says it was")
	}
	dest := filepath.Join(t.TempDir(), "b")
	m, err := db.Backup(dest)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	back := openT(t, dest, backupTestOpts())
	e, ok := back.Restored()
	if !ok || e.BackupVersion != m.Version || !e.BackupTime.Equal(m.VersionTime) || e.RestoredAt.Before(before) {
		t.Fatalf("epoch %+v (%v) after restoring %+v at %v", e, ok, m, before)
	}
	fillStore(t, back, 10)
	back = reopenT(t, back, dest, backupTestOpts())
	if again, ok := back.Restored(); !ok || again != e {
		t.Fatalf("after a restart the epoch is %+v (%v), want %+v", again, ok, e)
	}
	dest2 := filepath.Join(t.TempDir(), "b2")
	if _, err := back.Backup(dest2); err != nil {
		t.Fatal(err)
	}
	back.Close()
	if _, err := os.Stat(filepath.Join(dest2, restoreEpochName)); !os.IsNotExist(err) {
		t.Fatalf("the backup of a restored store copies its epoch: %v", err)
	}
	third := openT(t, dest2, backupTestOpts())
	defer third.Close()
	if e2, ok := third.Restored(); !ok || !e2.RestoredAt.After(e.RestoredAt) || e2.BackupVersion <= e.BackupVersion {
		t.Fatalf("the second restore's epoch %+v (%v); the first's %+v", e2, ok, e)
	}
}

// TestBackup_CopiesWhereTheFileSystemCannotLink: on a file system without
// hard links (memfs) every file is copied, and the copy is the store.
func TestBackup_CopiesWhereTheFileSystemCannotLink(t *testing.T) {
	disk := newMemDisk()
	opts := backupTestOpts()
	db := disk.open(t, opts)
	defer db.Close()
	fillStore(t, db, 300)
	checkpointT(t, db)
	want := fillStore(t, db, 50)
	m, err := db.Backup("/backup")
	if err != nil {
		t.Fatal(err)
	}
	if m.Linked != 0 || m.Files < 2 {
		t.Fatalf("on memfs: %d of %d files linked, want every file copied", m.Linked, m.Files)
	}
	back := openT(t, "/backup", disk.opts(opts))
	defer back.Close()
	sameState(t, "the copied backup", scanAll(t, back), want)
}
