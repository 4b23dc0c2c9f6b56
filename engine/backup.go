package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/wal"
)

// Backup (docs/design.md §15). A backup is the image a crash at one group
// boundary would have left: under ckptMu no checkpoint, merge, value-log
// collection or log truncation can add or remove a file, so the set of
// files is fixed while they are copied, and the log is cut at the last
// group written. Files that never change again are hard-linked where the
// file system allows; the two that grow (the log's tail, the active
// value-log segment) are always copied, up to what is written.

// backupManifestName is the file a backup's directory holds last: its
// presence says the copy is complete, and its content what it holds.
const backupManifestName = "BACKUP"

// backupFormat is the version of the manifest's format (docs/upgrading.md).
const backupFormat = 1

// BackupManifest is what a backup records about itself.
type BackupManifest struct {
	Format int `json:"format"`
	// Version is the last version in the copy: every batch up to it.
	Version store.Version `json:"version"`
	// VersionTime is a time no later than Version became durable: every
	// batch acknowledged before it is in the copy. A batch acknowledged
	// after it may be missing, so a restore fences keys first sent before
	// the restore (restore.go).
	VersionTime time.Time `json:"version_time"`
	// Files counts the files copied or linked, Linked those linked.
	Files  int `json:"files"`
	Linked int `json:"linked"`
}

// Backup writes a consistent copy of the live store into dest, which must
// not exist or be empty: every batch up to one durable version, with the
// manifest (backupManifestName) written last. It refuses with
// ErrFailStopped on a store whose log failed. Writes go on meanwhile;
// checkpoints wait until the copy is done.
func (db *DB) Backup(dest string) (BackupManifest, error) {
	if db.closed.Load() {
		return BackupManifest{}, store.ErrClosed
	}
	if db.stopped.Load() {
		return BackupManifest{}, fmt.Errorf("%w: a fail-stopped store's log may end in a torn group", store.ErrFailStopped)
	}
	if err := prepareBackupDest(db.fs, dest); err != nil {
		return BackupManifest{}, err
	}
	db.ckptMu.Lock()
	defer db.ckptMu.Unlock()
	// The time is taken before the log's cut: a batch acknowledged
	// before it was written before the cut.
	m := BackupManifest{Format: backupFormat, VersionTime: time.Now().UTC()}
	snap := db.log.Snapshot()
	m.Version = store.Version(snap.LastIndex)
	c := &backupCopier{fs: db.fs, m: &m}
	if err := c.copyCheckpoints(db.dir, dest); err != nil {
		return BackupManifest{}, err
	}
	if err := c.copyValueLog(db.vlog, filepath.Join(dest, vlogDirName)); err != nil {
		return BackupManifest{}, err
	}
	if err := c.copyLog(snap, filepath.Join(dest, walDirName)); err != nil {
		return BackupManifest{}, err
	}
	if err := writeBackupManifest(db.fs, dest, m); err != nil {
		return BackupManifest{}, err
	}
	db.opts.Logger.Info("engine: backup written", "dest", dest, "version", uint64(m.Version),
		"version_time", m.VersionTime, "files", m.Files, "linked", m.Linked)
	return m, nil
}

// BackupDir backs up the stopped data dir dir into dest: it opens the
// store (recovery included, automatic checkpoints off), backs it up, and
// closes it. It fails with ErrLocked if a process holds dir.
func BackupDir(dir, dest string, opts Options) (BackupManifest, error) {
	opts.CheckpointLogBytes = -1
	db, err := Open(dir, opts)
	if err != nil {
		return BackupManifest{}, err
	}
	m, err := db.Backup(dest)
	if cerr := db.Close(); err == nil && cerr != nil {
		return BackupManifest{}, cerr
	}
	return m, err
}

// prepareBackupDest creates dest, or accepts it empty, with its wal/ and
// vlog/ directories, and the LOCK file every data dir has.
func prepareBackupDest(fsys vfs.FS, dest string) error {
	ents, err := fsys.ReadDir(dest)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if len(ents) > 0 {
		return fmt.Errorf("%w: %s", ErrBackupDest, dest)
	}
	for _, d := range []string{walDirName, vlogDirName} {
		if err := vfs.MkdirAllSynced(fsys, filepath.Join(dest, d), 0o750); err != nil {
			return err
		}
	}
	f, err := fsys.OpenFile(filepath.Join(dest, lockFileName), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	return f.Close()
}

// backupCopier links or copies files into a backup and counts them.
type backupCopier struct {
	fs vfs.FS
	m  *BackupManifest
}

// put gives dst the bytes of src: a hard link when immutable and the file
// system allows, else a copy of its first n bytes (n < 0: all). Either is
// fsynced under its new name; the caller syncs the directory.
func (c *backupCopier) put(src, dst string, immutable bool, n int64) error {
	c.m.Files++
	if immutable && vfs.Link(c.fs, src, dst) {
		c.m.Linked++
		return vfs.SyncFile(c.fs, dst)
	}
	if err := vfs.CopyFile(c.fs, src, dst, n); err != nil {
		return fmt.Errorf("engine: backup %s: %w", src, err)
	}
	return nil
}

// copyCheckpoints links every checkpoint file of dir (bases' parts,
// deltas, an incomplete base's parts; never temp or damaged files). They
// are written once, under their final name by a rename.
func (c *backupCopier) copyCheckpoints(dir, dest string) error {
	ents, err := c.fs.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, ckptPrefix) ||
			!(strings.HasSuffix(name, ckptSuffix) || strings.HasSuffix(name, deltaSuffix)) {
			continue
		}
		if err := c.put(filepath.Join(dir, name), filepath.Join(dest, name), true, -1); err != nil {
			return err
		}
	}
	return vfs.SyncDir(c.fs, dest)
}

// copyValueLog links the sealed value-log segments and copies the active
// one up to what was appended (only the checkpointer appends, under
// ckptMu, which the caller holds).
func (c *backupCopier) copyValueLog(vl *valueLog, dest string) error {
	for _, id := range vl.ids() {
		active := vl.active != nil && vl.active.id == id
		src := filepath.Join(vl.dir, vlogSegName(id))
		if err := c.put(src, filepath.Join(dest, vlogSegName(id)), !active, vl.size(id)); err != nil {
			return err
		}
	}
	return vfs.SyncDir(c.fs, dest)
}

// copyLog links the log's sealed segments and copies its tail up to the
// last group written.
func (c *backupCopier) copyLog(snap wal.Snapshot, dest string) error {
	for _, src := range snap.Sealed {
		if err := c.put(src, filepath.Join(dest, filepath.Base(src)), true, -1); err != nil {
			return err
		}
	}
	if err := c.put(snap.Tail, filepath.Join(dest, filepath.Base(snap.Tail)), false, snap.TailBytes); err != nil {
		return err
	}
	return vfs.SyncDir(c.fs, dest)
}

// writeBackupManifest makes the manifest durable, and then dest's entry.
func writeBackupManifest(fsys vfs.FS, dest string, m BackupManifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := vfs.WriteFileSynced(fsys, filepath.Join(dest, backupManifestName), append(b, '\n'), 0o640); err != nil {
		return err
	}
	return vfs.SyncDir(fsys, filepath.Dir(filepath.Clean(dest)))
}

// ReadBackupManifest reads dir's backup manifest on fsys (nil:
// vfs.Default); fs.ErrNotExist if it has none (no backup, or one never
// finished).
func ReadBackupManifest(fsys vfs.FS, dir string) (BackupManifest, error) {
	var m BackupManifest
	if fsys == nil {
		fsys = vfs.Default
	}
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, backupManifestName))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%w: backup manifest %s: %v", store.ErrCorruption, filepath.Join(dir, backupManifestName), err)
	}
	if m.Format != backupFormat {
		return m, fmt.Errorf("%w: backup manifest format %d; this build reads %d", store.ErrCorruption, m.Format, backupFormat)
	}
	return m, nil
}
