package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/idemdb/idem/internal/tidwall"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/vfs/memfs"
)

// The contract with tidwall/wal: what this package relies on of the
// segment files tidwall writes, pinned against tidwall itself, so that
// re-vendoring a version that changes any of it fails here, by name,
// rather than as a repair or replay bug later.
//
//   - Naming (segment.go): a segment is named by the 20-digit, zero-padded
//     index of its first entry; a fresh log starts with an empty segment 1;
//     tidwall's loader leaves alone the other files we keep beside the
//     segments, and finishes an interrupted front truncation (".START")
//     by deleting the segments before it.
//   - Framing (segment.go, frame.go): a segment is entries back to back,
//     each uvarint(len) ‖ data — no header, no checksum of its own, so that
//     a zero-filled tail loads as empty entries (which our frames reject);
//     an entry cut short makes Open fail with ErrCorrupt.
//   - Cycling (writer.go planParts): before a batch, a tail segment already
//     beyond SegmentSize is left for a new one; within a batch, the entry
//     that brings a segment to SegmentSize or beyond is its last, the
//     segment is fsynced (even with NoSync) and the next entry starts a new
//     one, created at once; nothing else is fsynced but by Sync, which
//     fsyncs the tail segment only.

// syncNamesFS records which files were fsynced, in order.
type syncNamesFS struct {
	vfs.FS
	mu     sync.Mutex
	synced []string
}

type syncNamesFile struct {
	vfs.File
	fs   *syncNamesFS
	name string
}

func (f *syncNamesFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	inner, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &syncNamesFile{File: inner, fs: f, name: name}, nil
}

func (f *syncNamesFile) Sync() error {
	f.fs.mu.Lock()
	f.fs.synced = append(f.fs.synced, filepath.Base(f.name))
	f.fs.mu.Unlock()
	return f.File.Sync()
}

// takeSynced returns the names fsynced since the last call.
func (f *syncNamesFS) takeSynced() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.synced
	f.synced = nil
	return out
}

const contractDir = "/data/tw"

// openTW opens tidwall on fsys with the options Open (log.go) passes it.
func openTW(t *testing.T, fsys vfs.FS, segmentSize int) *tidwall.Log {
	t.Helper()
	tw, err := tidwall.Open(contractDir, &tidwall.Options{
		NoSync:           true,
		SegmentSize:      segmentSize,
		SegmentCacheSize: 1,
		NoCopy:           true,
		AllowEmpty:       true,
		DirPerms:         0o750,
		FilePerms:        0o640,
		FS:               twFS{fs: fsys, fsyncs: NewHistogram(fsyncBounds)},
	})
	if err != nil {
		t.Fatalf("tidwall open: %v", err)
	}
	return tw
}

// twWrite writes data as entries from first on, in one batch.
func twWrite(t *testing.T, tw *tidwall.Log, first uint64, data ...[]byte) {
	t.Helper()
	var b tidwall.Batch
	for i, d := range data {
		b.Write(first+uint64(i), d)
	}
	if err := tw.WriteBatch(&b); err != nil {
		t.Fatalf("write %d..%d: %v", first, first+uint64(len(data))-1, err)
	}
}

// files lists contractDir as name → size.
func files(t *testing.T, fsys vfs.FS) map[string]int64 {
	t.Helper()
	ents, err := fsys.ReadDir(contractDir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, e := range ents {
		fi, err := fsys.Stat(filepath.Join(contractDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fi.Size()
	}
	return out
}

func wantFiles(t *testing.T, what string, got, want map[string]int64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: tidwall's files are %v, want %v", what, got, want)
	}
}

// seg is the file name of the segment starting at index first, spelled
// out (not through segmentName, which is under test).
func seg(first uint64) string { return fmt.Sprintf("%020d", first) }

// entry returns n bytes of data for entry index i.
func entry(i uint64, n int) []byte {
	return bytes.Repeat([]byte{byte('a' + i%26)}, n)
}

func TestTidwallContract_SegmentNames(t *testing.T) {
	for _, first := range []uint64{1, 9, 10, 12345, math.MaxUint64} {
		if got := segmentName(first); got != seg(first) || len(got) != segmentNameLen {
			t.Fatalf("segmentName(%d) = %q, want %q (%d digits)", first, got, seg(first), segmentNameLen)
		}
	}
	// Names sort as their indexes do (ReadDir order is index order).
	names := []string{segmentName(10), segmentName(9), segmentName(100), segmentName(1)}
	sort.Strings(names)
	if !slices.Equal(names, []string{seg(1), seg(9), seg(10), seg(100)}) {
		t.Fatalf("segment names sort as %v", names)
	}

	// A fresh log is one empty segment 1, created by Open.
	fsys := memfs.New()
	tw := openTW(t, fsys, 1<<20)
	wantFiles(t, "a fresh log", files(t, fsys), map[string]int64{seg(1): 0})
	if first, _ := tw.FirstIndex(); first != 1 {
		t.Fatalf("a fresh log's FirstIndex is %d, want 1", first)
	}
	if last, _ := tw.LastIndex(); last != 0 {
		t.Fatalf("a fresh log's LastIndex is %d, want 0", last)
	}
	twWrite(t, tw, 1, entry(1, 5), entry(2, 5), entry(3, 5))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}

	// The files we keep beside the segments (the close marker, kept torn
	// bytes, legacy whole-segment copies) are not segments to tidwall:
	// it neither loads, deletes nor renames them.
	others := map[string][]byte{
		markerName:                   []byte("IDEMWCL1-not-a-segment"),
		seg(1) + tornInfix + seg(12): entry(9, 40),
		seg(1) + brokenInfix:         entry(8, 40),
	}
	for name, b := range others {
		if err := vfs.WriteFileSynced(fsys, filepath.Join(contractDir, name), b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	before := files(t, fsys)
	tw = openTW(t, fsys, 1<<20)
	if last, _ := tw.LastIndex(); last != 3 {
		t.Fatalf("with our files beside the segment, LastIndex is %d, want 3", last)
	}
	tw.Close()
	wantFiles(t, "after an open beside our own files", files(t, fsys), before)
	segs, start, err := listSegments(fsys, contractDir)
	if err != nil || len(segs) != 1 || segs[0] != (segmentFile{name: seg(1), first: 1}) || start != 0 {
		t.Fatalf("listSegments = %v, %d, %v; want only segment 1", segs, start, err)
	}

	// An interrupted front truncation leaves FIRST.START: the loader
	// deletes every segment before it and renames it — which Open (log.go)
	// relies on to repair only segments after it.
	fsys = memfs.New()
	tw = openTW(t, fsys, 1<<20)
	twWrite(t, tw, 1, entry(1, 5), entry(2, 5), entry(3, 5))
	tw.Close()
	var tail []byte
	for i := uint64(4); i <= 5; i++ {
		tail = binary.AppendUvarint(tail, 5)
		tail = append(tail, entry(i, 5)...)
	}
	if err := vfs.WriteFileSynced(fsys, filepath.Join(contractDir, seg(4)+".START"), tail, 0o640); err != nil {
		t.Fatal(err)
	}
	if segs, start, err := listSegments(fsys, contractDir); err != nil || len(segs) != 1 || start != 4 {
		t.Fatalf("listSegments with a START file = %v, %d, %v; want segment 1 and start 4", segs, start, err)
	}
	tw = openTW(t, fsys, 1<<20)
	first, _ := tw.FirstIndex()
	last, _ := tw.LastIndex()
	tw.Close()
	if first != 4 || last != 5 {
		t.Fatalf("after an interrupted truncation the log holds %d..%d, want 4..5", first, last)
	}
	wantFiles(t, "after an interrupted truncation", files(t, fsys), map[string]int64{seg(4): int64(len(tail))})
}

func TestTidwallContract_Framing(t *testing.T) {
	fsys := memfs.New()
	tw := openTW(t, fsys, 1<<20)
	// Sizes around the uvarint steps: one length byte up to 127, two up to
	// 16383, three beyond. Never 0: the log never writes an empty entry,
	// and the loader reads a zero length prefix as a preallocated
	// segment's fill (the tail is read back from its file).
	sizes := []int{1, 127, 128, 300, 16383, 16384}
	var data [][]byte
	var want []byte
	for i, n := range sizes {
		d := entry(uint64(i+1), n)
		data = append(data, d)
		want = binary.AppendUvarint(want, uint64(n))
		want = append(want, d...)
		if got := onDiskSize(n); got != len(binary.AppendUvarint(nil, uint64(n)))+n {
			t.Fatalf("onDiskSize(%d) = %d", n, got)
		}
	}
	twWrite(t, tw, 1, data...)
	for i, d := range data {
		got, err := tw.Read(uint64(i + 1))
		if err != nil || !bytes.Equal(got, d) {
			t.Fatalf("Read(%d) = %d bytes, %v; want the %d written", i+1, len(got), err, len(d))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := vfs.ReadFile(fsys, filepath.Join(contractDir, seg(1)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("segment 1 holds %d bytes that are not the entries as uvarint(len) ‖ data back to back (%d bytes)", len(got), len(want))
	}

	// Our frames in those entries: scanSegment reads back what the log
	// would have written through tidwall.
	fsys = memfs.New()
	tw = openTW(t, fsys, 1<<20)
	var frames [][]byte
	for i := uint64(1); i <= 3; i++ {
		frames = append(frames, appendFrame(nil, i, KindBatch, body(i), 0))
	}
	twWrite(t, tw, 1, frames...)
	tw.Close()
	raw, err := vfs.ReadFile(fsys, filepath.Join(contractDir, seg(1)))
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	r, err := scanSegment(raw, 1, func(_ uint64, _ Kind, b []byte) error { bodies = append(bodies, string(b)); return nil })
	if err != nil || r.err != nil || r.entries != 3 || r.validEnd != len(raw) {
		t.Fatalf("scanSegment of tidwall's segment: %+v, %v", r, err)
	}
	checkBodies(t, bodies, 3)

	// Patched tidwall reads a zero length prefix as the end of the
	// entries (a preallocated segment's fill), and writes on from there,
	// over the zeros: upstream loads zeros as empty entries.
	zeroed := append(append([]byte(nil), raw...), 0, 0, 0)
	if err := vfs.WriteFileSynced(fsys, filepath.Join(contractDir, seg(1)), zeroed, 0o640); err != nil {
		t.Fatal(err)
	}
	tw = openTW(t, fsys, 1<<20)
	last, _ := tw.LastIndex()
	fourth := appendFrame(nil, 4, KindBatch, body(4), 0)
	twWrite(t, tw, 4, fourth)
	tw.Close()
	if last != 3 {
		t.Fatalf("a segment with three zero bytes after 3 entries: LastIndex %d, want 3", last)
	}
	after, err := vfs.ReadFile(fsys, filepath.Join(contractDir, seg(1)))
	if err != nil {
		t.Fatal(err)
	}
	if want := len(raw) + onDiskSize(len(fourth)); len(after) != want {
		t.Fatalf("entry 4 written after the zeros' start: segment is %d bytes, want %d", len(after), want)
	}

	// An entry cut short is corruption to tidwall's loader: Open (log.go)
	// cuts a torn tail itself before tidwall sees it.
	if err := vfs.WriteFileSynced(fsys, filepath.Join(contractDir, seg(1)), raw[:len(raw)-1], 0o640); err != nil {
		t.Fatal(err)
	}
	_, err = tidwall.Open(contractDir, &tidwall.Options{NoSync: true, AllowEmpty: true, FS: twFS{fs: fsys, fsyncs: NewHistogram(fsyncBounds)}})
	if !errors.Is(err, tidwall.ErrCorrupt) {
		t.Fatalf("tidwall open of a segment whose last entry is cut short: %v, want ErrCorrupt", err)
	}
}

func TestTidwallContract_CyclingRule(t *testing.T) {
	// Entries of 9 data bytes are 10 bytes on disk.
	ten := func(i uint64) []byte { return entry(i, 9) }
	type step struct {
		write []uint64 // entries written in one batch
		files map[string]int64
		syncs []string // files fsynced by the write
	}
	for _, tc := range []struct {
		name    string
		segSize int
		steps   []step
	}{
		{"the entry that reaches the size ends the segment", 60, []step{
			{[]uint64{1, 2, 3, 4, 5}, map[string]int64{seg(1): 50}, nil},
			{[]uint64{6}, map[string]int64{seg(1): 60, seg(7): 0}, []string{seg(1)}},
			{[]uint64{7}, map[string]int64{seg(1): 60, seg(7): 10}, nil},
		}},
		{"an entry past the size stays in its segment", 55, []step{
			{[]uint64{1, 2, 3, 4, 5}, map[string]int64{seg(1): 50}, nil},
			{[]uint64{6}, map[string]int64{seg(1): 60, seg(7): 0}, []string{seg(1)}},
		}},
		{"one byte short does not cycle", 61, []step{
			{[]uint64{1, 2, 3, 4, 5, 6}, map[string]int64{seg(1): 60}, nil},
			{[]uint64{7}, map[string]int64{seg(1): 70, seg(8): 0}, []string{seg(1)}},
		}},
		{"a batch is split at every segment it fills", 35, []step{
			{[]uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, map[string]int64{seg(1): 40, seg(5): 40, seg(9): 20}, []string{seg(1), seg(5)}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := &syncNamesFS{FS: memfs.New()}
			tw := openTW(t, fsys, tc.segSize)
			defer tw.Close()
			fsys.takeSynced()
			for _, s := range tc.steps {
				var data [][]byte
				for _, i := range s.write {
					data = append(data, ten(i))
				}
				twWrite(t, tw, s.write[0], data...)
				what := fmt.Sprintf("after writing %v with SegmentSize %d", s.write, tc.segSize)
				wantFiles(t, what, files(t, fsys), s.files)
				if got := fsys.takeSynced(); !slices.Equal(got, s.syncs) {
					t.Fatalf("%s (NoSync): fsynced %v, want %v", what, got, s.syncs)
				}
			}
			// Sync fsyncs the tail segment, and only it.
			if err := tw.Sync(); err != nil {
				t.Fatal(err)
			}
			tailName := slices.Max(slices.Collect(maps.Keys(files(t, fsys))))
			if got := fsys.takeSynced(); !slices.Equal(got, []string{tailName}) {
				t.Fatalf("Sync fsynced %v, want only the tail %s", got, tailName)
			}
		})
	}

	// Before a batch, a tail already beyond SegmentSize (a log reopened
	// with a smaller one) is left for a new segment — but one exactly at
	// it is written to, and left after the entry.
	for _, tc := range []struct {
		name    string
		reopen  int
		files   map[string]int64
		lastIdx uint64
	}{
		{"a tail beyond the size", 55, map[string]int64{seg(1): 60, seg(7): 10}, 6},
		{"a tail exactly at the size", 60, map[string]int64{seg(1): 70, seg(8): 0}, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := memfs.New()
			tw := openTW(t, fsys, 1000)
			var data [][]byte
			for i := uint64(1); i <= 6; i++ {
				data = append(data, ten(i))
			}
			twWrite(t, tw, 1, data...)
			tw.Close()
			tw = openTW(t, fsys, tc.reopen)
			defer tw.Close()
			if last, _ := tw.LastIndex(); last != tc.lastIdx {
				t.Fatalf("reopened LastIndex %d, want %d", last, tc.lastIdx)
			}
			twWrite(t, tw, 7, ten(7))
			wantFiles(t, fmt.Sprintf("entry 7 after a reopen with SegmentSize %d", tc.reopen), files(t, fsys), tc.files)
		})
	}

	// A log reopened on an empty tail segment (cycled, nothing written to
	// it yet) reports the entry before it as its last: newLog takes the
	// next index from there.
	fsys := memfs.New()
	tw := openTW(t, fsys, 60)
	var data [][]byte
	for i := uint64(1); i <= 6; i++ {
		data = append(data, ten(i))
	}
	twWrite(t, tw, 1, data...)
	tw.Close()
	wantFiles(t, "six entries that fill the segment", files(t, fsys), map[string]int64{seg(1): 60, seg(7): 0})
	tw = openTW(t, fsys, 60)
	last, _ := tw.LastIndex()
	tw.Close()
	if last != 6 {
		t.Fatalf("a log whose tail segment 7 is empty reopens with LastIndex %d, want 6", last)
	}
}

// TestTidwallContract_TheLogsMirrorOfCyclingMatchesTidwall: the log
// predicts tidwall's segments (planParts) to write each group's part
// lengths and to know when to fsync the directory. After every group of a
// seeded random run — reopened with other SegmentBytes, among them exactly
// its tail's size and one byte less — the segments it believes in and its
// tail's size are what tidwall wrote, and the group heads it wrote tile
// every segment: each part starts with a head whose length ends exactly
// where the next part, or the segment, begins.
func TestTidwallContract_TheLogsMirrorOfCyclingMatchesTidwall(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 4))
	d := newMemDisk()
	tailSize := func() int { // where its entries end: a preallocated tail is longer
		segs := d.segments(t)
		r, _ := scanSegment(d.read(t, segs[len(segs)-1].name), segs[len(segs)-1].first, nil)
		if r.err != nil {
			t.Fatalf("tail: %v", r.err)
		}
		return r.validEnd
	}
	lives := []struct {
		name string
		size func(tail int) int
	}{
		{"300", func(int) int { return 300 }},
		{"512", func(int) int { return 512 }},
		{"the tail's size", func(tail int) int { return tail }},
		{"one byte less than the tail", func(tail int) int { return tail - 1 }},
		{"200", func(int) int { return 200 }},
		{"1024", func(int) int { return 1024 }},
	}
	written := 0
	for life, lv := range lives {
		tail := 0
		if life > 0 {
			tail = tailSize()
		}
		segBytes := lv.size(tail)
		l, _ := d.mustOpen(t, Options{SegmentBytes: segBytes})
		if err := l.Replay(1, func(uint64, Kind, []byte) error { return nil }); err != nil {
			t.Fatalf("replay of life %d: %v", life, err)
		}
		for g := range 60 {
			n := 1 + rng.IntN(6)
			bodies := make([][]byte, n)
			for i := range bodies {
				bodies[i] = []byte(strings.Repeat("b", rng.IntN(160)))
			}
			if g == 59 {
				// End the life on a tail that is not empty, so that the
				// next one may reopen with exactly its size.
				bodies = append(bodies[:0], []byte("z"))
				n = 1
			}
			if err := appendGroup(l, bodies...); err != nil {
				t.Fatal(err)
			}
			written += n
			l.ioMu.Lock()
			mirror, tail := slices.Clone(l.segs), l.tailBytes
			l.ioMu.Unlock()
			actual := d.segments(t)
			what := fmt.Sprintf("life %d (SegmentBytes %d: %s), group %d", life, segBytes, lv.name, g)
			if !slices.Equal(mirror, actual) {
				i := 0
				for i < min(len(mirror), len(actual)) && mirror[i] == actual[i] {
					i++
				}
				t.Fatalf("%s: the log believes in %d segments, tidwall wrote %d; from #%d the log has %v, tidwall %v",
					what, len(mirror), len(actual), i, mirror[i:], actual[i:])
			}
			if size := tailSize(); size != tail {
				t.Fatalf("%s: the log believes its tail holds %d bytes, tidwall wrote %d", what, tail, size)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		for _, s := range d.segments(t) {
			headsTile(t, fmt.Sprintf("after life %d, segment %s", life, s.name), d.read(t, s.name), s.first)
		}
	}
	got, _, err := d.replay(Options{})
	if err != nil || len(got) != written {
		t.Fatalf("replayed %d entries (%v), want %d", len(got), err, written)
	}
	if len(d.segments(t)) < 10 {
		t.Fatalf("only %d segments: the run did not cycle enough to mean anything", len(d.segments(t)))
	}
}

// headsTile checks that a segment is a sequence of group parts, each a
// head whose declared length covers exactly its own frames.
func headsTile(t *testing.T, what string, data []byte, first uint64) {
	t.Helper()
	idx := first
	if r, _ := scanSegment(data, first, nil); r.fill {
		data = data[:r.validEnd]
	}
	for pos := 0; pos < len(data); {
		f, n, err := frameAt(data, pos, idx)
		if err != nil {
			t.Fatalf("%s: entry %d at offset %d: %v", what, idx, pos, err)
		}
		if f.part == 0 {
			t.Fatalf("%s: entry %d at offset %d begins a part but is not a group head", what, idx, pos)
		}
		end := pos + int(f.part)
		for pos, idx = pos+n, idx+1; pos < end; pos, idx = pos+n, idx+1 {
			if f, n, err = frameAt(data, pos, idx); err != nil {
				t.Fatalf("%s: entry %d at offset %d: %v", what, idx, pos, err)
			}
			if f.part != 0 {
				t.Fatalf("%s: entry %d at offset %d is a head inside the part that ends at %d", what, idx, pos, end)
			}
		}
		if pos != end {
			t.Fatalf("%s: a part declares its end at %d, its frames end at %d", what, end, pos)
		}
	}
}

// The tail segment is written through (PATCH.md, fourth change): a write
// leaves no copy of the segment in memory, and a Read of the tail — after
// writes, across a cycle, after a reopen — loads what the file holds.
func TestTidwallContract_TheTailIsWrittenThroughAndReadBackFromItsFile(t *testing.T) {
	fsys := memfs.New()
	tw := openTW(t, fsys, 4096)
	var data [][]byte
	for i := range 40 { // 40 × ~300 B: three segments of 4 KiB
		data = append(data, entry(uint64(i+1), 200+i*7))
	}
	readAll := func(what string, tw *tidwall.Log, n int) {
		t.Helper()
		for i := range n {
			got, err := tw.Read(uint64(i + 1))
			if err != nil || !bytes.Equal(got, data[i]) {
				t.Fatalf("%s: Read(%d) = %d bytes, %v; want the %d written", what, i+1, len(got), err, len(data[i]))
			}
		}
	}
	twWrite(t, tw, 1, data[:5]...)
	readAll("after one write", tw, 5)
	twWrite(t, tw, 6, data[5:9]...) // the tail read above is stale now
	readAll("after a write that followed a read", tw, 9)
	for i := 9; i < len(data); i += 3 {
		twWrite(t, tw, uint64(i+1), data[i:min(i+3, len(data))]...)
	}
	readAll("across cycles", tw, len(data))
	if err := tw.Cycle(); err != nil {
		t.Fatal(err)
	}
	if err := tw.Cycle(); err != nil { // an empty tail is kept
		t.Fatal(err)
	}
	twWrite(t, tw, uint64(len(data)+1), entry(uint64(len(data)+1), 10))
	data = append(data, entry(uint64(len(data)+1), 10))
	readAll("after Cycle", tw, len(data))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	tw = openTW(t, fsys, 4096)
	defer tw.Close()
	readAll("after a reopen", tw, len(data))
	twWrite(t, tw, uint64(len(data)+1), entry(uint64(len(data)+1), 20)) // writes on from the end
	data = append(data, entry(uint64(len(data)+1), 20))
	readAll("after a write on the reopened tail", tw, len(data))
}

// The log holds a batch's buffer, not the segment: upstream kept the whole
// tail segment in memory (reserved for a whole segment at the first write:
// 8 MiB per idemd process, and the segment before in its cache).
func TestTidwallContract_TheLogDoesNotHoldItsSegmentsInMemory(t *testing.T) {
	tw, err := tidwall.Open(t.TempDir(), &tidwall.Options{NoSync: true, SegmentSize: 16 << 20, SegmentCacheSize: 1,
		NoCopy: true, AllowEmpty: true, FS: twFS{fs: vfs.Default, fsyncs: NewHistogram(fsyncBounds)}})
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	batch := make([][]byte, 16)
	for i := range batch {
		batch[i] = entry(uint64(i), 4096)
	}
	live := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var b tidwall.Batch
	next := uint64(1)
	before := live()
	const batches = 384 // 24 MiB: a whole segment cycled, and half the next
	for range batches {
		for _, d := range batch {
			b.Write(next, d)
			next++
		}
		if err := tw.WriteBatch(&b); err != nil {
			t.Fatal(err)
		}
	}
	if grew, bound := int64(live())-int64(before), int64(2<<20); grew > bound {
		t.Fatalf("after 24 MiB logged the log holds %d more bytes of heap, want at most %d (a batch's buffer)", grew, bound)
	}
}
