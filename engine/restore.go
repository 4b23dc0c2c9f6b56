package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
)

// Restore epoch (docs/design.md §15). A store opened on a backup (a dir
// holding a backup manifest) lost what was acknowledged after the backup's
// version: a client retrying such a key would see it executed a second
// time. The first open of a backup therefore records, durably and before
// anything is written, when it was restored; the layers above fence keys
// first sent before then (receipt.RestoreFence). Later opens read the
// epoch and never move it: a restart does not re-arm the fence.

// restoreEpochName is the file that records a data dir's restore epoch.
const restoreEpochName = "RESTORED"

// restoreFormat is the version of the epoch file's format (docs/upgrading.md).
const restoreFormat = 1

// RestoreEpoch is when and from what a store was restored.
type RestoreEpoch struct {
	Format int `json:"format"`
	// RestoredAt is the first open of the backup.
	RestoredAt time.Time `json:"restored_at"`
	// BackupVersion and BackupTime are the backup manifest's: batches
	// acknowledged after BackupTime may be lost.
	BackupVersion store.Version `json:"backup_version"`
	BackupTime    time.Time     `json:"backup_time"`
}

// Restored returns the store's restore epoch; ok=false if it was never
// restored from a backup.
func (db *DB) Restored() (RestoreEpoch, bool) {
	if db.restore == nil {
		return RestoreEpoch{}, false
	}
	return *db.restore, true
}

// armRestore reads dir's restore epoch, or records one now if dir holds a
// backup manifest and no epoch yet (the first open of a backup). nil: the
// dir was never restored.
func armRestore(fsys vfs.FS, dir string, now time.Time) (*RestoreEpoch, error) {
	path := filepath.Join(dir, restoreEpochName)
	b, err := vfs.ReadFile(fsys, path)
	if err == nil {
		var e RestoreEpoch
		if err := json.Unmarshal(b, &e); err != nil || e.Format != restoreFormat {
			return nil, fmt.Errorf("%w: restore epoch %s does not decode (format %d; this build reads %d): %v",
				store.ErrCorruption, path, e.Format, restoreFormat, err)
		}
		return &e, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	m, err := ReadBackupManifest(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	e := RestoreEpoch{Format: restoreFormat, RestoredAt: now.UTC(), BackupVersion: m.Version, BackupTime: m.VersionTime}
	b, err = json.MarshalIndent(e, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := vfs.WriteFileSynced(fsys, path, append(b, '\n'), 0o640); err != nil {
		return nil, fmt.Errorf("engine: record the restore epoch: %w", err)
	}
	return &e, nil
}
