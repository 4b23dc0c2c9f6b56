package wal

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"

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
	// The part of a group write that holds the last valid frame: the
	// offset of its head and the end the head declares. Both are -1 when
	// that frame lies in no declared part (frames written before heads
	// existed, or no valid frame at all).
	partStart, partEnd int
	// fill: the entries end at validEnd and only zeros follow, the fill
	// of a preallocated segment (prealloc.go).
	fill bool
}

// scanSegment decodes the entries of one segment whose first entry has index
// first. fn, if not nil, sees each valid frame in order; an error from fn stops
// the scan and is returned as is. Bodies alias data.
func scanSegment(data []byte, first uint64, fn func(index uint64, kind Kind, body []byte) error) (scanResult, error) {
	r := scanResult{partStart: -1, partEnd: -1}
	for pos := 0; pos < len(data); {
		if data[pos] == 0 && isZero(data[pos:]) {
			r.fill = true
			return r, nil
		}
		index := first + r.entries
		f, n, err := frameAt(data, pos, index)
		if err != nil {
			r.err = err
			return r, nil
		}
		switch {
		case f.part > 0:
			r.partStart, r.partEnd = pos, pos+int(f.part)
		case pos >= r.partEnd:
			r.partStart, r.partEnd = -1, -1
		}
		if fn != nil {
			if err := fn(index, f.kind, f.body); err != nil {
				return r, err
			}
		}
		pos += n
		r.entries++
		r.validEnd = pos
	}
	return r, nil
}

// frameAt decodes the length-prefixed frame at pos as entry index and
// returns it with its on-disk size.
func frameAt(data []byte, pos int, index uint64) (frame, int, error) {
	size, n := binary.Uvarint(data[pos:])
	if n <= 0 || uint64(len(data)-pos-n) < size {
		return frame{}, 0, &FrameError{Index: index, Reason: "truncated entry"}
	}
	f, err := decodeFrame(index, data[pos+n:pos+n+int(size)])
	return f, n + int(size), err
}

// tailShape is where the tail segment's entries end and whether fill (a
// preallocated segment's zeros) follows them. When repair read the tail it
// also keeps what it read: the segment's first index, its entries and its
// image, as the file holds it after repair, so that neither tidwall's open
// nor the replay reads the segment again.
type tailShape struct {
	end     int
	fill    bool
	first   uint64
	entries uint64
	image   []byte
}

// tailShapeOf reads seg, the tail segment after repair, for its shape.
func tailShapeOf(fsys vfs.FS, dir string, seg segmentFile) (*tailShape, error) {
	data, err := vfs.ReadFile(fsys, filepath.Join(dir, seg.name))
	if err != nil {
		return nil, err
	}
	r, _ := scanSegment(data, seg.first, nil)
	return &tailShape{end: r.validEnd, fill: r.fill}, nil
}
