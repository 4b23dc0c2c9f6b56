package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/wal"
)

// Recovery on open: repair the WAL's tail, load the newest checkpoint that
// is usable, replay the log after it.
//
// No single checkpoint can make the store unopenable. A checkpoint at N
// lets the log be truncated only up to the previous checkpoint P (see
// Checkpoint), so when N is damaged or missing, P and the log from P on
// still hold everything: recovery falls back to P, warns naming both files,
// and moves N aside as <name>.damaged. A checkpoint is usable only if it
// decodes and the log still holds every entry after it; if none is, and
// the log does not start at entry 1, the open is refused naming every
// checkpoint file it tried. The log records each checkpoint it made
// (wal.KindCheckpoint), which is how a missing newest one is noticed.

// damagedSuffix marks a checkpoint that failed to load and was moved aside.
const damagedSuffix = ".damaged"

// recover opens the WAL, loads a checkpoint and replays the log after it.
func (db *DB) recover() error {
	walOpts := db.opts.WAL
	walOpts.OnDurable = db.onDurable
	log, _, err := wal.Open(filepath.Join(db.dir, walDirName), walOpts)
	if err != nil {
		return walErr(err)
	}
	ckpt, err := db.loadCheckpoint(log.FirstIndex(), func() []uint64 { return recordedCheckpoints(log) })
	if err != nil {
		log.Close()
		return err
	}
	var replayed, entries int64
	newest := uint64(0) // the newest checkpoint the log says was written
	err = log.Replay(ckpt.index+1, func(index uint64, kind wal.Kind, body []byte) error {
		replayed += int64(len(body))
		entries++
		switch kind {
		case wal.KindCheckpoint:
			if n, k := binary.Uvarint(body); k > 0 {
				newest = max(newest, n)
			}
			return nil
		case wal.KindBatch:
		default:
			return nil
		}
		var rec applyRec
		if err := decodeBody(body, func(op Op) { rec.ops = append(rec.ops, op) }); err != nil {
			return &CorruptionError{File: walDirName, Reason: fmt.Sprintf("entry %d", index), Err: err}
		}
		// Bodies are only valid during the callback; the tree keeps copies.
		db.applyToTree(Version(index), ownOps(rec.ops))
		return nil
	})
	if err != nil {
		log.Close()
		return walErr(err)
	}
	if newest > ckpt.index {
		db.opts.Logger.Warn("engine: the newest checkpoint is missing or damaged; recovered everything from an older one and the log after it",
			"missing", checkpointName(Version(newest)), "used", ckpt.name())
	}
	if last := Version(log.NextIndex() - 1); last > db.applied {
		db.applied = last
	}
	db.log = log
	db.lastCkptIndex.Store(ckpt.index)
	// The replayed tail counts towards the next checkpoint, so that a
	// crash loop cannot keep the log growing: recovery time stays bounded
	// by one checkpoint interval however often the process dies.
	db.loggedBytes.Store(replayed)
	db.recovery = RecoveryStats{FromCheckpoint: Version(ckpt.index), ReplayedEntries: entries, ReplayedBytes: replayed}
	db.reportDamageFiles()
	return nil
}

// loadedCheckpoint is what recovery started from.
type loadedCheckpoint struct {
	index uint64 // 0: no checkpoint, the log from entry 1
}

func (c loadedCheckpoint) name() string {
	if c.index == 0 {
		return "(none: the whole log)"
	}
	return checkpointName(Version(c.index))
}

// loadCheckpoint fills the tree from the newest usable checkpoint. The log
// holds entries from logFirst on; recorded lists the checkpoints the log
// says were written (read only to explain a refusal).
func (db *DB) loadCheckpoint(logFirst uint64, recorded func() []uint64) (loadedCheckpoint, error) {
	idxs, err := listCheckpoints(db.fs, db.dir)
	if err != nil {
		return loadedCheckpoint{}, err
	}
	var tried []string
	for i, want := range idxs {
		name := checkpointName(want)
		if uint64(want)+1 < logFirst {
			// Older than the log: it cannot be completed by replay, and
			// neither can anything older.
			break
		}
		err := db.loadCheckpointFile(name, want)
		if err == nil {
			c := loadedCheckpoint{index: uint64(want)}
			if len(tried) > 0 {
				db.opts.Logger.Warn("engine: the newest checkpoint is damaged; recovered everything from an older one and the log after it",
					"damaged", tried, "used", name)
				db.moveAside(idxs[:i])
			}
			return c, nil
		}
		if !errors.Is(err, errCheckpointDamaged) {
			return loadedCheckpoint{}, err
		}
		db.opts.Logger.Warn("engine: checkpoint does not load", "file", name, "err", err)
		tried = append(tried, name+" ("+err.Error()+")")
	}
	if logFirst <= 1 {
		if len(tried) > 0 {
			db.opts.Logger.Warn("engine: no checkpoint loads; the log holds every entry, so recovery replays it all",
				"damaged", tried)
			db.moveAside(idxs)
		}
		db.tree = index.NewKeySpace()
		return loadedCheckpoint{}, nil
	}
	var what []string
	if len(tried) > 0 {
		what = append(what, "damaged: "+strings.Join(tried, "; "))
	}
	var missing []string
	for _, v := range recorded() {
		if !slices.Contains(idxs, Version(v)) {
			missing = append(missing, checkpointName(Version(v)))
		}
	}
	if len(missing) > 0 {
		what = append(what, "missing, though the log records writing them: "+strings.Join(missing, ", "))
	}
	if len(what) == 0 {
		what = append(what, "no checkpoint file is present")
	}
	return loadedCheckpoint{}, &CorruptionError{File: db.dir, Reason: fmt.Sprintf(
		"no usable checkpoint (%s): the log starts at entry %d, so the entries before it exist only in a checkpoint. "+
			"Nothing was changed. Restore the data directory from a backup, or put back a checkpoint file "+
			"ckpt-<index>.ckpt with index ≥ %d", strings.Join(what, "; "), logFirst, logFirst-1)}
}

// recordedCheckpoints lists the checkpoints the log records writing
// (wal.KindCheckpoint entries), oldest first.
func recordedCheckpoints(log *wal.Log) []uint64 {
	var out []uint64
	_ = log.Replay(log.FirstIndex(), func(_ uint64, kind wal.Kind, body []byte) error {
		if n, k := binary.Uvarint(body); kind == wal.KindCheckpoint && k > 0 {
			out = append(out, n)
		}
		return nil
	})
	return out
}

// errCheckpointDamaged marks a checkpoint file that does not decode.
var errCheckpointDamaged = errors.New("damaged checkpoint")

// loadCheckpointFile decodes one checkpoint into the tree.
func (db *DB) loadCheckpointFile(name string, want Version) error {
	data, err := vfs.ReadFile(db.fs, filepath.Join(db.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: vanished", errCheckpointDamaged)
	}
	if err != nil {
		return err
	}
	tree := index.NewKeySpace()
	at, err := decodeCheckpoint(data, func(k, v []byte, ver Version) {
		// Records alias data: one allocation holds the whole image.
		// k and v are adjacent in the image: one item aliases both.
		tree.Put(index.PackedKV(k[:len(k)+len(v):len(k)+len(v)], len(k), uint64(ver)))
	})
	if err == nil && at != want {
		err = fmt.Errorf("header index %d does not match file name", at)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errCheckpointDamaged, err)
	}
	db.tree = tree
	db.applied = at
	db.ckptSize.Store(int64(len(data)))
	return nil
}

// moveAside renames damaged checkpoints to <name>.damaged: out of every
// later choice, kept for an operator until newer checkpoints supersede
// them. A failure only costs a warning: the next open skips them again.
func (db *DB) moveAside(idxs []Version) {
	for _, v := range idxs {
		p := filepath.Join(db.dir, checkpointName(v))
		if err := db.fs.Rename(p, p+damagedSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			db.opts.Logger.Warn("engine: could not move a damaged checkpoint aside", "file", p, "err", err)
		}
	}
	if err := vfs.SyncDir(db.fs, db.dir); err != nil {
		db.opts.Logger.Warn("engine: could not sync the data directory", "err", err)
	}
}

// reportDamageFiles says at start-up which damaged checkpoints are kept.
func (db *DB) reportDamageFiles() {
	ents, err := db.fs.ReadDir(db.dir)
	if err != nil {
		return
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ckptPrefix) && strings.HasSuffix(e.Name(), damagedSuffix) {
			names = append(names, e.Name())
		}
	}
	if len(names) > 0 {
		db.opts.Logger.Warn("engine: damaged checkpoints kept for inspection (safe to delete)", "dir", db.dir, "files", names)
	}
}

func walErr(err error) error {
	if errors.Is(err, wal.ErrCorruption) && !errors.Is(err, ErrCorruption) {
		return &CorruptionError{File: walDirName, Err: err}
	}
	return err
}
