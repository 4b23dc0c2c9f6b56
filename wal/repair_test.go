package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Repair on open (DESIGN §3): a torn or zero tail of the last segment is cut
// back to the last valid frame, keeping the original as .broken; damage
// anywhere else refuses the open (or the replay) with a *CorruptionError that
// names segment and entry.

const repairEntries = 100

var repairOpts = Options{SegmentBytes: 1024}

// multiSegmentLog writes repairEntries entries into several segments.
func multiSegmentLog(t *testing.T) (dir string, segs []segmentFile) {
	t.Helper()
	dir = t.TempDir()
	writeLog(t, dir, repairOpts, repairEntries)
	segs = segmentsT(t, dir)
	if len(segs) < 3 {
		t.Fatalf("want at least 3 segments, got %d", len(segs))
	}
	return dir, segs
}

func TestOpen_TornTailIsRepaired(t *testing.T) {
	dir, segs := multiSegmentLog(t)
	last := segs[len(segs)-1]
	path := filepath.Join(dir, last.name)
	orig := readFileT(t, path)
	sp := spansOf(t, orig)
	lastSpan := sp[len(sp)-1]
	if len(sp) < 2 {
		t.Fatalf("last segment holds %d entries, want ≥ 2", len(sp))
	}
	// Cut the last frame in the middle, as a crash during its write would.
	torn := orig[:lastSpan.frame+(lastSpan.end-lastSpan.frame)/2]
	writeFileT(t, path, torn)

	got, rep, err := replayAll(t, dir, repairOpts)
	if err != nil {
		t.Fatalf("open with torn tail: %v", err)
	}
	checkBodies(t, got, repairEntries-1)
	if rep.Segment != last.name || rep.CutOffset != int64(lastSpan.start) || rep.DroppedLen != int64(len(torn)-lastSpan.start) {
		t.Fatalf("repair report %+v, want segment %s cut at %d dropping %d", rep, last.name, lastSpan.start, len(torn)-lastSpan.start)
	}
	if b := readFileT(t, rep.BrokenCopy); !bytes.Equal(b, torn) {
		t.Fatalf(".broken copy %s holds %d bytes, want the %d-byte torn original", rep.BrokenCopy, len(b), len(torn))
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != int64(lastSpan.start) {
		t.Fatalf("segment after repair: %v, %v; want %d bytes", fi, err, lastSpan.start)
	}

	// The repaired log takes the lost index again and survives a reopen
	// without another repair.
	l, rep := openLogT(t, dir, repairOpts)
	if rep.Segment != "" {
		t.Fatalf("second open repaired again: %+v", rep)
	}
	if idx := appendSync(t, l, body(repairEntries)); idx != repairEntries {
		t.Fatalf("append after repair got index %d, want %d", idx, repairEntries)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, _, err = replayAll(t, dir, repairOpts)
	if err != nil {
		t.Fatal(err)
	}
	checkBodies(t, got, repairEntries)
}

func TestOpen_ZeroTailIsRepaired(t *testing.T) {
	dir, segs := multiSegmentLog(t)
	path := filepath.Join(dir, segs[len(segs)-1].name)
	orig := readFileT(t, path)
	// Far more zeros than GroupBytesMax: a zero-filled tail is debris at any
	// length (tidwall alone would read it as thousands of empty entries).
	opts := repairOpts
	opts.GroupBytesMax = 256
	writeFileT(t, path, append(append([]byte(nil), orig...), make([]byte, 8192)...))

	got, rep, err := replayAll(t, dir, opts)
	if err != nil {
		t.Fatalf("open with zero tail: %v", err)
	}
	checkBodies(t, got, repairEntries)
	if rep.Segment != segs[len(segs)-1].name || rep.CutOffset != int64(len(orig)) || rep.DroppedLen != 8192 {
		t.Fatalf("repair report %+v", rep)
	}
	if len(brokenCopies(t, dir)) != 1 {
		t.Fatalf("want one .broken copy, have %v", brokenCopies(t, dir))
	}
	if b := readFileT(t, path); !bytes.Equal(b, orig) {
		t.Fatalf("segment not cut back to its %d valid bytes (has %d)", len(orig), len(b))
	}
}

func TestOpen_FlippedBitInLastFrameIsRepaired(t *testing.T) {
	dir, segs := multiSegmentLog(t)
	path := filepath.Join(dir, segs[len(segs)-1].name)
	sp := spansOf(t, readFileT(t, path))
	flipBit(t, path, sp[len(sp)-1])

	got, rep, err := replayAll(t, dir, repairOpts)
	if err != nil {
		t.Fatalf("open with a bad last frame: %v", err)
	}
	checkBodies(t, got, repairEntries-1)
	if rep.Segment == "" || rep.BrokenCopy == "" {
		t.Fatalf("no repair reported: %+v", rep)
	}
}

// A truncated segment that is not the last cannot be a torn write: tidwall
// fsyncs a segment before it starts the next one.
func TestOpen_TruncatedNonLastSegmentIsCorruption(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func(sp []span) int // new length of the first segment
	}{
		{"mid-frame", func(sp []span) int { return sp[len(sp)-1].end - 3 }},
		{"frame-boundary", func(sp []span) int { return sp[len(sp)-1].start }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, segs := multiSegmentLog(t)
			first := segs[0]
			path := filepath.Join(dir, first.name)
			data := readFileT(t, path)
			sp := spansOf(t, data)
			writeFileT(t, path, data[:tc.cut(sp)])

			_, _, err := replayAll(t, dir, repairOpts)
			ce := wantCorruption(t, err)
			if ce.Segment != first.name {
				t.Fatalf("corruption names segment %q, want %q", ce.Segment, first.name)
			}
			if want := first.first + uint64(len(sp)) - 1; ce.Index != want {
				t.Fatalf("corruption at entry %d, want %d (%v)", ce.Index, want, err)
			}
			if len(brokenCopies(t, dir)) != 0 {
				t.Fatalf("a non-last segment was treated as a torn tail")
			}
		})
	}
}

func TestOpen_FlippedBitMidLogIsCorruption(t *testing.T) {
	dir, segs := multiSegmentLog(t)
	seg := segs[1]
	path := filepath.Join(dir, seg.name)
	orig := readFileT(t, path)
	sp := spansOf(t, orig)
	flipBit(t, path, sp[2])
	damaged := readFileT(t, path)

	_, _, err := replayAll(t, dir, repairOpts)
	ce := wantCorruption(t, err)
	if ce.Segment != seg.name || ce.Index != seg.first+2 || ce.Offset != int64(sp[2].start) {
		t.Fatalf("corruption %+v, want segment %s entry %d offset %d", ce, seg.name, seg.first+2, sp[2].start)
	}
	if ce.Reason == "" {
		t.Fatalf("corruption does not say why: %v", err)
	}
	if b := readFileT(t, path); !bytes.Equal(b, damaged) || len(brokenCopies(t, dir)) != 0 {
		t.Fatalf("refusing to open modified the damaged segment")
	}
}

// Damage in the last segment further from its end than one group write
// (GroupBytesMax) cannot be a torn write either.
func TestOpen_FlippedBitFarFromTailIsCorruption(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 1 << 20, GroupBytesMax: 512}
	writeLog(t, dir, opts, 300)
	segs := segmentsT(t, dir)
	if len(segs) != 1 {
		t.Fatalf("want one segment, have %d", len(segs))
	}
	path := filepath.Join(dir, segs[0].name)
	sp := spansOf(t, readFileT(t, path))
	flipBit(t, path, sp[4])
	damaged := readFileT(t, path)

	_, _, err := replayAll(t, dir, opts)
	ce := wantCorruption(t, err)
	if ce.Segment != segs[0].name || ce.Index != 5 || ce.Offset != int64(sp[4].start) {
		t.Fatalf("corruption %+v, want segment %s entry 5 offset %d", ce, segs[0].name, sp[4].start)
	}
	if b := readFileT(t, path); !bytes.Equal(b, damaged) || len(brokenCopies(t, dir)) != 0 {
		t.Fatalf("refusing to open modified the damaged segment")
	}

	// The same damage within the last GroupBytesMax bytes is a torn tail.
	dir2 := t.TempDir()
	writeLog(t, dir2, opts, 300)
	path2 := filepath.Join(dir2, segs[0].name)
	sp2 := spansOf(t, readFileT(t, path2))
	flipBit(t, path2, sp2[len(sp2)-3])
	got, rep, err := replayAll(t, dir2, opts)
	if err != nil {
		t.Fatalf("damage near the tail: %v", err)
	}
	checkBodies(t, got, 297)
	if rep.Segment == "" {
		t.Fatalf("no repair reported")
	}
}

func TestReplay_MissingFrontIsCorruption(t *testing.T) {
	dir, segs := multiSegmentLog(t)
	if err := os.Remove(filepath.Join(dir, segs[0].name)); err != nil {
		t.Fatal(err)
	}
	_, _, err := replayAll(t, dir, repairOpts)
	ce := wantCorruption(t, err)
	if ce.Index != 1 || ce.Segment != segs[1].name {
		t.Fatalf("corruption %+v, want entry 1 missing before segment %s", ce, segs[1].name)
	}
}

func wantCorruption(t *testing.T, err error) *CorruptionError {
	t.Helper()
	if !errors.Is(err, ErrCorruption) {
		t.Fatalf("got %v, want a corruption error", err)
	}
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("%v is not a *CorruptionError", err)
	}
	return ce
}
