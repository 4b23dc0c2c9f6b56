package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/idemdb/idem/vfs"
)

// Bounds of repair's bookkeeping.
const (
	// tornKeepBytesMax bounds how many cut bytes repair keeps beside the
	// segment (<segment>.torn-<offset>), so that repair never needs free
	// space the size of a segment: on a full disk it must still be able to
	// cut and open.
	tornKeepBytesMax = 1 << 20
	// tornFilesMax bounds how many such files the log keeps; older ones are
	// removed, and all of a segment's go when front truncation removes it.
	tornFilesMax = 8
	tornInfix    = ".torn-"
	brokenInfix  = ".broken" // whole-segment copies made by earlier versions
)

// RepairReport says what repair on open did to the last segment.
type RepairReport struct {
	Segment    string // segment that was cut, "" if none
	CutOffset  int64  // new length of the segment
	DroppedLen int64  // bytes removed
	TornCopy   string // where (the first tornKeepBytesMax of) the cut bytes were kept; "" if they could not be
	Why        string // why the damage counted as a torn write
}

// repairTail cuts a torn final group write off the last segment, or
// refuses with a *CorruptionError when the damage is not one (judgeTail).
// With a clean close marker, the tail must be exactly as it was closed.
// It also returns the tail's shape once repaired, so that Open need not
// read the segment again.
func repairTail(fsys vfs.FS, dir string, seg segmentFile, m closeMarker, state closeState, maxTornBytes int64, log *slog.Logger) (RepairReport, *tailShape, error) {
	path := filepath.Join(dir, seg.name)
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return RepairReport{}, nil, err
	}
	r, _ := scanSegment(data, seg.first, nil)
	if r.err == nil {
		if state == closedCleanly {
			if err := checkMarker(m, seg, int64(len(data)), seg.first+r.entries-1, path); err != nil {
				return RepairReport{}, nil, err
			}
		}
		return RepairReport{}, &tailShape{end: r.validEnd, fill: r.fill, first: seg.first, entries: r.entries, image: data}, nil
	}
	facts := tailFactsOf(data, seg.first, r, state, maxTornBytes)
	cut, why := judgeTail(facts)
	if !cut {
		return RepairReport{}, nil, &CorruptionError{Segment: seg.name, Path: path, Index: facts.damageIndex,
			Offset: facts.damageAt, Reason: fmt.Sprintf("%v; %s", r.err, why)}
	}
	rep := RepairReport{Segment: seg.name, CutOffset: facts.damageAt, DroppedLen: facts.size - facts.damageAt, Why: why}
	cutBytes := data[facts.damageAt:facts.size]
	keep := filepath.Join(dir, fmt.Sprintf("%s%s%020d", seg.name, tornInfix, facts.damageAt))
	if err := vfs.WriteFileSynced(fsys, keep, cutBytes[:min(len(cutBytes), tornKeepBytesMax)], 0o640); err != nil {
		// The cut bytes were never acknowledged (that is what made them
		// cuttable); keeping them is for the curious, and must not stop a
		// store on a full disk from opening.
		log.Warn("wal: could not keep the cut bytes", "segment", seg.name, "err", err)
	} else {
		rep.TornCopy = keep
	}
	if err := truncateSync(fsys, path, facts.damageAt); err != nil {
		return RepairReport{}, nil, err
	}
	if err := vfs.SyncDir(fsys, dir); err != nil {
		return RepairReport{}, nil, err
	}
	pruneTornFiles(fsys, dir, log)
	// The cut took any fill with it: the tail is an ordinary file now.
	kept := data[:facts.damageAt]
	r, _ = scanSegment(kept, seg.first, nil)
	return rep, &tailShape{end: int(facts.damageAt), first: seg.first, entries: r.entries, image: kept}, nil
}

func truncateSync(fsys vfs.FS, path string, size int64) error {
	f, err := fsys.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// DamageFile is a file repair keeps in the log directory for an operator.
type DamageFile struct {
	Name  string
	Bytes int64
}

// damageFiles lists the kept cut bytes and legacy whole-segment copies in
// dir, oldest first.
func damageFiles(fsys vfs.FS, dir string) ([]DamageFile, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []DamageFile
	for _, e := range ents {
		if name := e.Name(); isDamageFile(name) {
			var size int64
			if fi, err := e.Info(); err == nil {
				size = fi.Size()
			}
			out = append(out, DamageFile{Name: name, Bytes: size})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func isDamageFile(name string) bool {
	if len(name) <= segmentNameLen {
		return false
	}
	rest := name[segmentNameLen:]
	return strings.HasPrefix(rest, tornInfix) || strings.HasPrefix(rest, brokenInfix)
}

// pruneTornFiles removes the oldest kept cut bytes beyond tornFilesMax.
func pruneTornFiles(fsys vfs.FS, dir string, log *slog.Logger) {
	files, err := damageFiles(fsys, dir)
	if err != nil {
		return
	}
	var torn []string
	for _, f := range files {
		if strings.Contains(f.Name, tornInfix) {
			torn = append(torn, f.Name)
		}
	}
	for _, name := range torn[:max(len(torn)-tornFilesMax, 0)] {
		if err := fsys.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Warn("wal: could not remove old cut bytes", "file", name, "err", err)
		}
	}
}

// removeDamageFilesOf removes the damage files of a segment that front
// truncation removed: the entries they were cut from are checkpointed.
func removeDamageFilesOf(fsys vfs.FS, dir, segment string) error {
	files, err := damageFiles(fsys, dir)
	if err != nil {
		return err
	}
	for _, f := range files {
		if strings.HasPrefix(f.Name, segment) {
			if err := fsys.Remove(filepath.Join(dir, f.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}
