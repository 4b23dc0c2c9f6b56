package wal

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/idemdb/idem/vfs"
)

// Verify: what Open and Replay would find in a log, found without changing
// it. Offline checkers (engine/check, idemctl check) call it on a stopped
// log. It applies the same rules as repair on open — the same judgeTail,
// tailFactsOf and checkMarker — so that what it calls a torn tail is
// exactly what Open would cut, and what it calls damage is exactly what
// Open or Replay would refuse. Unlike them it does not stop at the first
// damage: every segment is read to its end.

// MarkerState says how the log was last stopped, as the close marker tells.
type MarkerState string

const (
	MarkerAbsent  MarkerState = "absent"  // no marker: the process stopped without Close
	MarkerClean   MarkerState = "clean"   // a valid marker: closed cleanly, nothing in flight
	MarkerDamaged MarkerState = "damaged" // a marker that does not decode
)

// SegmentReport is what Verify read in one segment file.
type SegmentReport struct {
	Name   string
	First  uint64 // the index its name gives
	Frames uint64 // valid frames from its start
	Bytes  int64
	// EntriesEnd is where its valid frames end: Bytes, less a
	// preallocated segment's fill (prealloc.go) or damage.
	EntriesEnd int64
}

// VerifiedEntry is one valid frame Verify read. Body aliases the segment's
// bytes and is only valid during the callback.
type VerifiedEntry struct {
	Segment string
	Index   uint64
	Kind    Kind
	Body    []byte
}

// VerifyReport is what Verify found. Nothing on disk was changed.
type VerifyReport struct {
	Segments []SegmentReport // in index order
	// FirstIndex and LastIndex bound the entries an open would keep;
	// LastIndex is FirstIndex-1 for an empty log.
	FirstIndex, LastIndex uint64
	Marker                MarkerState
	// MarkerFile names the marker's file when it is not absent.
	MarkerFile string
	// Torn is the cut an open would make of a torn final group write
	// (Torn.Segment is "" if none). TornCopy stays empty: nothing is kept.
	Torn RepairReport
	// Damage is everything Open or Replay would refuse, in segment order.
	Damage []*CorruptionError
	// DamageFiles are the cut bytes (and the whole-segment copies of
	// earlier versions) that earlier repairs kept in the directory.
	DamageFiles []DamageFile
	// Spares are the preallocated segments-to-be in the directory
	// (prealloc.go): zeros nothing reads, replaced by the next one made.
	Spares []string
	// StartIndex is the index of an interrupted truncation's .START file
	// (written by tidwall's own truncation, which this log no longer uses),
	// 0 if none. tidwall's loader completes it on open.
	StartIndex uint64
}

// Verify reads every segment of the log in dir as Open and a full Replay
// would, calling fn (if not nil) for each valid frame in index order. The
// error is for what could not be read (a missing directory, an I/O error);
// damage is reported in VerifyReport.Damage.
func Verify(dir string, opts Options, fn func(VerifiedEntry)) (VerifyReport, error) {
	opts = opts.withDefaults()
	fsys := opts.FS
	rep := VerifyReport{Marker: MarkerAbsent}
	segs, startIndex, err := listSegments(fsys, dir)
	if err != nil {
		return rep, err
	}
	rep.StartIndex = startIndex
	marker, state, err := rep.readDir(fsys, dir)
	if err != nil {
		return rep, err
	}
	n := len(segs)
	if n == 0 {
		if state == closedCleanly {
			rep.Damage = append(rep.Damage, &CorruptionError{Segment: segmentName(marker.tailFirst),
				Path: filepath.Join(dir, segmentName(marker.tailFirst)), Index: marker.lastIndex,
				Reason: "the log was closed cleanly, but it has no segments now"})
		}
		rep.FirstIndex = 1 // Open starts an empty log at entry 1
		return rep, nil
	}
	// As in Open: a tail that is an interrupted truncation's copy is
	// tidwall's to load, not repair's to judge.
	judgeLast := segs[n-1].first > startIndex
	for i, s := range segs {
		path := filepath.Join(dir, s.name)
		data, err := vfs.ReadFile(fsys, path)
		if err != nil {
			return rep, err
		}
		r, _ := scanSegment(data, s.first, func(index uint64, kind Kind, body []byte) error {
			if fn != nil {
				fn(VerifiedEntry{Segment: s.name, Index: index, Kind: kind, Body: body})
			}
			return nil
		})
		rep.Segments = append(rep.Segments, SegmentReport{Name: s.name, First: s.first, Frames: r.entries, Bytes: int64(len(data)), EntriesEnd: int64(r.validEnd)})
		if i == n-1 && judgeLast {
			rep.judgeTail(data, s, r, marker, state, 2*int64(opts.GroupBytesMax), path)
			continue
		}
		if r.err != nil {
			// Replay's rule: only the last segment can be torn by a crash.
			rep.Damage = append(rep.Damage, &CorruptionError{Segment: s.name, Path: path, Index: s.first + r.entries,
				Offset: int64(r.validEnd), Reason: r.err.Error() + "; only the last segment can be torn by a crash"})
			continue
		}
		if i+1 < n {
			if want := segs[i+1].first - s.first; r.entries != want {
				rep.Damage = append(rep.Damage, &CorruptionError{Segment: s.name, Path: path, Index: s.first + r.entries,
					Offset: int64(r.validEnd), Reason: fmt.Sprintf("segment holds %d entries, want %d (the next segment starts at entry %d)", r.entries, want, segs[i+1].first)})
			}
		}
	}
	last := rep.Segments[n-1]
	rep.FirstIndex, rep.LastIndex = segs[0].first, last.First+last.Frames-1
	return rep, nil
}

// judgeTail applies repairTail's rules to the last segment, recording the
// cut or the refusal instead of making it.
func (rep *VerifyReport) judgeTail(data []byte, seg segmentFile, r scanResult, m closeMarker, state closeState, maxTornBytes int64, path string) {
	if r.err == nil {
		if state != closedCleanly {
			return
		}
		var ce *CorruptionError
		if err := checkMarker(m, seg, int64(len(data)), seg.first+r.entries-1, path); errors.As(err, &ce) {
			rep.Damage = append(rep.Damage, ce)
		}
		return
	}
	facts := tailFactsOf(data, seg.first, r, state, maxTornBytes)
	cut, why := judgeTail(facts)
	if !cut {
		rep.Damage = append(rep.Damage, &CorruptionError{Segment: seg.name, Path: path, Index: facts.damageIndex,
			Offset: facts.damageAt, Reason: fmt.Sprintf("%v; %s", r.err, why)})
		return
	}
	rep.Torn = RepairReport{Segment: seg.name, CutOffset: facts.damageAt, DroppedLen: facts.size - facts.damageAt, Why: why}
}

// readDir reports the log directory's files beside its segments: the
// spares, the close marker (returned, with its state) and the kept copies
// of cut bytes.
func (rep *VerifyReport) readDir(fsys vfs.FS, dir string) (closeMarker, closeState, error) {
	var err error
	if rep.Spares, err = sparesIn(fsys, dir); err != nil {
		return closeMarker{}, notClosed, err
	}
	marker, state, err := readMarker(fsys, dir)
	if err != nil {
		return marker, state, err
	}
	switch state {
	case closedCleanly:
		rep.Marker, rep.MarkerFile = MarkerClean, markerName
	case markerDamaged:
		rep.Marker, rep.MarkerFile = MarkerDamaged, markerName
	}
	rep.DamageFiles, err = damageFiles(fsys, dir)
	return marker, state, err
}
