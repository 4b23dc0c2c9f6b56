package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/idemdb/idem/vfs"
)

// tidwall/wal names a segment by the 20-digit index of its first entry and
// stores each entry as uvarint(len(data)) ‖ data. We read segments ourselves
// (repair, replay) rather than through tidwall: its loader rejects a torn
// tail outright, and reading through it races with its writer.

const segmentNameLen = 20

type segmentFile struct {
	name  string
	first uint64 // index of its first entry
}

func segmentName(first uint64) string { return fmt.Sprintf("%020d", first) }

// listSegments returns the numbered segment files of dir in index order and
// the index of an interrupted tidwall truncation (".START" file), or 0.
func listSegments(fsys vfs.FS, dir string) (segs []segmentFile, startIndex uint64, err error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || len(name) < segmentNameLen {
			continue
		}
		idx, perr := strconv.ParseUint(name[:segmentNameLen], 10, 64)
		if perr != nil || idx == 0 {
			continue
		}
		switch {
		case len(name) == segmentNameLen:
			segs = append(segs, segmentFile{name: name, first: idx})
		case name[segmentNameLen:] == ".START":
			startIndex = idx
		}
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].first < segs[j].first })
	return segs, startIndex, nil
}

// scanResult describes how far a segment's content decoded.
type scanResult struct {
	entries  uint64 // valid frames decoded
	validEnd int    // byte offset just past the last valid frame
	err      error  // why decoding stopped early (nil if it reached the end)
}

// scanSegment decodes the entries of one segment whose first entry has index
// first. fn, if not nil, sees each valid frame in order; an error from fn stops
// the scan and is returned as is. Bodies alias data.
func scanSegment(data []byte, first uint64, fn func(index uint64, kind Kind, body []byte) error) (scanResult, error) {
	var r scanResult
	for pos := 0; pos < len(data); {
		size, n := binary.Uvarint(data[pos:])
		if n <= 0 || uint64(len(data)-pos-n) < size {
			r.err = &FrameError{Index: first + r.entries, Reason: "truncated entry"}
			return r, nil
		}
		entry := data[pos+n : pos+n+int(size)]
		index := first + r.entries
		kind, body, err := decodeFrame(index, entry)
		if err != nil {
			r.err = err
			return r, nil
		}
		if fn != nil {
			if err := fn(index, kind, body); err != nil {
				return r, err
			}
		}
		pos += n + int(size)
		r.entries++
		r.validEnd = pos
	}
	return r, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// RepairReport says what repair on open did to the last segment.
type RepairReport struct {
	Segment    string // segment that was cut, "" if none
	CutOffset  int64  // new length of the segment
	DroppedLen int64  // bytes removed
	BrokenCopy string // path of the preserved original
}

// repairTail cuts a torn or zero-filled tail off the last segment. Damage is a
// torn tail when everything after the last valid frame is zero, or when it
// starts within the final maxTornBytes of the file — no more than one group
// write can have been in flight when the process stopped. Anything else is
// corruption and refuses the open. The original is kept as <name>.broken.
func repairTail(fsys vfs.FS, dir string, seg segmentFile, maxTornBytes int) (RepairReport, error) {
	path := filepath.Join(dir, seg.name)
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return RepairReport{}, err
	}
	r, _ := scanSegment(data, seg.first, nil)
	if r.err == nil {
		return RepairReport{}, nil
	}
	tail := data[r.validEnd:]
	if !allZero(tail) && len(tail) > maxTornBytes {
		return RepairReport{}, &CorruptionError{Segment: seg.name, Index: seg.first + r.entries,
			Offset: int64(r.validEnd), Reason: fmt.Sprintf("%v, %d bytes before the end of the last segment", r.err, len(tail))}
	}
	broken, err := preserveBroken(fsys, dir, seg.name, data)
	if err != nil {
		return RepairReport{}, err
	}
	if err := truncateSync(fsys, path, int64(r.validEnd)); err != nil {
		return RepairReport{}, err
	}
	if err := vfs.SyncDir(fsys, dir); err != nil {
		return RepairReport{}, err
	}
	return RepairReport{Segment: seg.name, CutOffset: int64(r.validEnd), DroppedLen: int64(len(tail)), BrokenCopy: broken}, nil
}

// preserveBroken writes the damaged original beside the segment under a name
// no later repair overwrites.
func preserveBroken(fsys vfs.FS, dir, name string, data []byte) (string, error) {
	for i := 0; ; i++ {
		p := filepath.Join(dir, name+".broken")
		if i > 0 {
			p += "." + strconv.Itoa(i)
		}
		f, err := fsys.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return "", err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return "", err
		}
		return p, f.Close()
	}
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

func isSegmentDebris(name string) bool {
	return strings.HasSuffix(name, ".TEMP")
}
