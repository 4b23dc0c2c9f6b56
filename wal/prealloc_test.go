package wal

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/vfs/errorfs"
	"github.com/idemdb/idem/vfs/memfs"
)

// Preallocated segments (prealloc.go): written over zeros, read back to
// their entries' end, and never a reason to lose or refuse an entry.

// preallocOpts: small segments, so that a test cycles many of them.
var preallocOpts = Options{SegmentBytes: 8 << 10}

// writeUntilPreallocated appends entries (their bodies go to bodies) until
// the log has started want segments on spares and the tail is one of them
// with entries in it. Appending is what moves the log on, so this polls as
// it writes, up to a bound.
func writeUntilPreallocated(t *testing.T, l *Log, bodies *[]string, want uint64) {
	t.Helper()
	const appendsMax = 20000
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		if l.Stats().Preallocated >= want && l.tailIsFilled() && l.tailBytesNow() > 0 {
			return
		}
		if i == appendsMax || time.Now().After(deadline) {
			t.Fatalf("after %d appends, %d segments were preallocated, want %d", i, l.Stats().Preallocated, want)
		}
		b := body(uint64(len(*bodies) + 1))
		appendSync(t, l, b)
		*bodies = append(*bodies, string(b))
	}
}

func (l *Log) tailIsFilled() bool {
	l.ioMu.Lock()
	defer l.ioMu.Unlock()
	return l.prealloc != nil && l.prealloc.tailFilled
}

func (l *Log) tailBytesNow() int {
	l.ioMu.Lock()
	defer l.ioMu.Unlock()
	return l.tailBytes
}

// TestPrealloc_SegmentsAreWrittenOverZerosAndReadBackWhole: on the real
// file system, segments made from spares keep the spare's size (no write
// grew them), every segment reads back as contiguous entries followed by
// zeros, and a reopened log replays every entry and writes on after them.
func TestPrealloc_SegmentsAreWrittenOverZerosAndReadBackWhole(t *testing.T) {
	dir := t.TempDir()
	l, _ := openLogT(t, dir, preallocOpts)
	var bodies []string
	writeUntilPreallocated(t, l, &bodies, 4)
	spare := l.prealloc.size
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _, err := listSegments(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	filled := 0
	next := uint64(1)
	for _, s := range segs {
		data, err := vfs.ReadFile(vfs.Default, filepath.Join(dir, s.name))
		if err != nil {
			t.Fatal(err)
		}
		r, _ := scanSegment(data, s.first, nil)
		if r.err != nil || s.first != next {
			t.Fatalf("segment %s: %+v; want entries from %d on, undamaged", s.name, r, next)
		}
		next += r.entries
		if r.fill {
			filled++
			if int64(len(data)) != spare {
				t.Fatalf("segment %s has fill but is %d bytes, not the spare's %d: a write grew it", s.name, len(data), spare)
			}
		}
	}
	if filled < 4 || next != uint64(len(bodies))+1 {
		t.Fatalf("%d segments with fill (want ≥ 4), entries up to %d (want %d)", filled, next-1, len(bodies))
	}

	l, rep := openLogT(t, dir, preallocOpts)
	if rep.Segment != "" {
		t.Fatalf("a cleanly closed preallocated log was cut: %+v", rep)
	}
	if err := l.Replay(1, func(uint64, Kind, []byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		b := body(uint64(len(bodies) + 1))
		appendSync(t, l, b)
		bodies = append(bodies, string(b))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, _, err := replayAll(t, dir, preallocOpts)
	if err != nil || !slices.Equal(got, bodies) {
		t.Fatalf("after a reopen and 3 more entries: %d entries, %v; want the %d written", len(got), err, len(bodies))
	}
}

// TestPrealloc_ACrashMidWriteOverZerosKeepsEveryAcknowledgedEntry: a
// group in flight over a preallocated tail's zeros, torn every way a crash
// can tear it, never costs an acknowledged entry; the tail is repaired
// where it must be, and the log writes on.
func TestPrealloc_ACrashMidWriteOverZerosKeepsEveryAcknowledgedEntry(t *testing.T) {
	tears := []struct {
		name string
		tear memfs.Tear
	}{
		{"drop", memfs.DropUnsynced},
		{"keep-1", memfs.KeepUnsynced(1)},
		{"keep-25", memfs.KeepUnsynced(25)},
		{"keep-90", memfs.KeepUnsynced(90)},
		{"zero-fill", memfs.ZeroFill(70, 64)},
		{"keep-all", memfs.KeepAll},
	}
	for _, tc := range tears {
		t.Run(tc.name, func(t *testing.T) {
			d := newMemDisk()
			l, _ := d.mustOpen(t, preallocOpts)
			var acked []string
			writeUntilPreallocated(t, l, &acked, 2)
			var unacked []string
			first := uint64(len(acked) + 1)
			for i := range 4 {
				unacked = append(unacked, string(body(first+uint64(i))))
			}
			// Fail only the segment's fsync: a spare being made meanwhile
			// must not take the error.
			d.efs.Add(errorfs.Rule{Op: errorfs.OpSync, PathContains: "/0000", Err: errorfs.EIO})
			if err := appendGroup(l, bodiesOf(unacked)...); !errors.Is(err, ErrAmbiguous) {
				t.Fatalf("group whose fsync failed: %v, want ErrAmbiguous", err)
			}
			d.crash(l, tc.tear)
			l, rep, err := d.open(preallocOpts)
			if err != nil {
				t.Fatalf("open after the crash: %v", err)
			}
			// The log's idea of its tail, which it mirrors tidwall's
			// cycling by, is where the entries on disk end: after a cut
			// too, which takes a preallocated tail's fill with it.
			segs := d.segments(t)
			onDisk, _ := scanSegment(d.read(t, segs[len(segs)-1].name), segs[len(segs)-1].first, nil)
			if n := l.tailBytesNow(); n != onDisk.validEnd || l.tailIsFilled() != onDisk.fill {
				t.Fatalf("after the repair the log believes its tail holds %d bytes (filled %v); on disk %+v", n, l.tailIsFilled(), onDisk)
			}
			var got []string
			if err := l.Replay(1, func(_ uint64, _ Kind, b []byte) error { got = append(got, string(b)); return nil }); err != nil {
				t.Fatal(err)
			}
			wantAcknowledged(t, tc.name, got, acked, unacked)
			t.Logf("%s: %d of %d unacknowledged entries kept, repair %+v", tc.name, len(got)-len(acked), len(unacked), rep)

			after := string(body(uint64(len(got) + 1)))
			appendSync(t, l, []byte(after))
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			again, _, err := d.replay(preallocOpts)
			if err != nil || !slices.Equal(again, append(got, after)) {
				t.Fatalf("after the repair and one more entry: %d entries, %v; want %d", len(again), err, len(got)+1)
			}
		})
	}
}

func bodiesOf(s []string) [][]byte {
	out := make([][]byte, len(s))
	for i, b := range s {
		out[i] = []byte(b)
	}
	return out
}

// TestPrealloc_DamageToAcknowledgedBytesBeforeTheFillIsRefused: the fill
// after a preallocated tail's entries does not make damage to the groups
// before the last one look torn.
func TestPrealloc_DamageToAcknowledgedBytesBeforeTheFillIsRefused(t *testing.T) {
	d := newMemDisk()
	l, _ := d.mustOpen(t, preallocOpts)
	var acked []string
	writeUntilPreallocated(t, l, &acked, 2)
	for range 3 { // three one-entry groups in the preallocated tail
		b := body(uint64(len(acked) + 1))
		appendSync(t, l, b)
		acked = append(acked, string(b))
	}
	crashed := d.crash(l, nil)
	segs := d.segments(t)
	tail := segs[len(segs)-1]
	orig := d.read(t, tail.name)
	sp := spansOf(t, orig)
	if len(sp) < 3 {
		t.Fatalf("tail holds %d entries, want ≥ 3", len(sp))
	}
	if r, _ := scanSegment(orig, tail.first, nil); !r.fill {
		t.Fatalf("tail %s is not preallocated: %+v", tail.name, r)
	}
	for _, s := range sp[len(sp)-3 : len(sp)-1] {
		d.fs = crashed.Recover(memfs.KeepAll)
		d.write(t, tail.name, flipped(orig, s.frame+frameHeader+1))
		before := d.names(t)
		if _, _, err := d.replay(preallocOpts); err == nil {
			t.Fatalf("a flipped byte in the acknowledged entry at offset %d, before the last group, was cut", s.start)
		} else {
			wantCorruption(t, err)
		}
		if !slices.Equal(d.names(t), before) {
			t.Fatal("refusing to open changed the log directory")
		}
	}
}

// TestPrealloc_LeftoverSparesAreNeverTaken: a SPARE may hold entries
// whose segment rename a crash undid, a SPARE.partial part of its zeros. Open
// leaves both (a refused open changes nothing), and the log never makes a
// segment of them: every segment it writes reads back as its own entries.
func TestPrealloc_LeftoverSparesAreNeverTaken(t *testing.T) {
	d := newMemDisk()
	l, _ := d.mustOpen(t, preallocOpts)
	acked := groupedLog(t, d, l, 3)
	d.crash(l, nil)
	junk := []byte(strings.Repeat("old entries", 1000))
	d.write(t, spareName, junk)
	d.write(t, spareTempName, junk[:100])
	l, _ = d.mustOpen(t, preallocOpts)
	if names := d.names(t); !slices.Contains(names, spareName) || !slices.Contains(names, spareTempName) {
		t.Fatalf("open changed the leftovers: %v", names)
	}
	if err := l.Replay(1, func(uint64, Kind, []byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	writeUntilPreallocated(t, l, &acked, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range d.segments(t) {
		if r, _ := scanSegment(d.read(t, s.name), s.first, nil); r.err != nil {
			t.Fatalf("segment %s: %v", s.name, r.err)
		}
	}
	got, _, err := d.replay(preallocOpts)
	if err != nil || !slices.Equal(got, acked) {
		t.Fatalf("replay: %d entries, %v; want %d", len(got), err, len(acked))
	}
}

// TestPrealloc_ASpareThatFailsIsAnOrdinarySegment: a spare that cannot be
// written (a full disk) or taken (a failed rename) leaves nothing behind,
// is counted, and costs no entry: the segments are ordinary files.
func TestPrealloc_ASpareThatFailsIsAnOrdinarySegment(t *testing.T) {
	for _, rule := range []errorfs.Rule{
		{Op: errorfs.OpWrite, PathContains: spareTempName, Sticky: true, Err: errorfs.ENOSPC},
		{Op: errorfs.OpSync, PathContains: spareTempName, Sticky: true, Err: errorfs.EIO},
		{Op: errorfs.OpRename, PathContains: "/" + spareName, Sticky: true, Err: errorfs.EIO},
	} {
		t.Run(fmt.Sprintf("%v-%s", rule.Op, rule.PathContains), func(t *testing.T) {
			d := newMemDisk()
			l, _ := d.mustOpen(t, preallocOpts)
			d.efs.Add(rule)
			var bodies []string
			for i := 0; l.Stats().PreallocFailures < 2; i++ {
				if i == 20000 {
					t.Fatalf("no spare failed in %d appends: %+v", i, l.Stats())
				}
				b := body(uint64(len(bodies) + 1))
				appendSync(t, l, b)
				bodies = append(bodies, string(b))
			}
			if n := l.Stats().Preallocated; n != 0 {
				t.Fatalf("%d segments preallocated under %v", n, rule)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if names := d.names(t); slices.Contains(names, spareTempName) {
				t.Fatalf("a failed spare was left behind: %v", names)
			}
			if len(d.segments(t)) < 2 {
				t.Fatalf("want the log to have cycled, it has %d segments", len(d.segments(t)))
			}
			got, _, err := d.replay(preallocOpts)
			if err != nil || !slices.Equal(got, bodies) {
				t.Fatalf("replay: %d entries, %v; want %d", len(got), err, len(bodies))
			}
		})
	}
}

// TestPrealloc_NoPreallocationWritesGrowingFiles: with the option set, no
// spare is ever made and every segment is exactly its entries.
func TestPrealloc_NoPreallocationWritesGrowingFiles(t *testing.T) {
	d := newMemDisk()
	opts := preallocOpts
	opts.NoPreallocation = true
	l, _ := d.mustOpen(t, opts)
	var bodies []string
	for len(d.segments(t)) < 4 {
		b := body(uint64(len(bodies) + 1))
		appendSync(t, l, b)
		bodies = append(bodies, string(b))
	}
	if s := l.Stats(); s.Preallocated != 0 || s.PreallocFailures != 0 {
		t.Fatalf("stats %+v", s)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range d.segments(t) {
		data := d.read(t, s.name)
		if r, _ := scanSegment(data, s.first, nil); r.err != nil || r.fill || r.validEnd != len(data) {
			t.Fatalf("segment %s: %+v over %d bytes; want entries only", s.name, r, len(data))
		}
	}
	if names := d.names(t); slices.Contains(names, spareName) || slices.Contains(names, spareTempName) {
		t.Fatalf("spares with NoPreallocation: %v", names)
	}
}

// TestPrealloc_AWriteTornInTheLastBlockOfASpareIsCut: the group that
// fills a segment ends past SegmentBytes, in the spare's slack, and with
// small segments in its last block. A crash that keeps a prefix of that
// group ending inside the last block leaves non-zero bytes there and the
// spare's zeros after them: that is a torn final write, cut on open, not
// a changed one.
func TestPrealloc_AWriteTornInTheLastBlockOfASpareIsCut(t *testing.T) {
	d := newMemDisk()
	l, _ := d.mustOpen(t, preallocOpts)
	var acked []string
	writeUntilPreallocated(t, l, &acked, 2)
	segmentBytes := preallocOpts.SegmentBytes
	spare := l.prealloc.size
	lastBlock := int(spare) - zeroBlockBytes
	if lastBlock > segmentBytes {
		t.Fatalf("spare of %d bytes for %d-byte segments: the filling group would not reach its last block", spare, segmentBytes)
	}
	for l.tailBytesNow() < segmentBytes-600 {
		b := body(uint64(len(acked) + 1))
		appendSync(t, l, b)
		acked = append(acked, string(b))
		if !l.tailIsFilled() {
			t.Fatal("the tail cycled before it came near its end")
		}
	}
	start := l.tailBytesNow()
	// It ends inside the spare, three quarters into the last block: a
	// frame that claimed more than the file holds would read as torn
	// whatever the fill.
	big := fmt.Sprintf("big-%d-%s", len(acked)+1, strings.Repeat("x", lastBlock-start+3*zeroBlockBytes/4))
	if end := start + len(big); end < lastBlock+zeroBlockBytes/2 || end > int(spare)-64 {
		t.Fatalf("a %d-byte entry at offset %d ends at %d, not late in the last block at %d..%d", len(big), start, end, lastBlock, spare)
	}
	d.efs.Add(errorfs.Rule{Op: errorfs.OpSync, PathContains: "/0000", Err: errorfs.EIO})
	if err := appendGroup(l, []byte(big)); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("group whose fsync failed: %v, want ErrAmbiguous", err)
	}
	tail := d.segments(t)
	tailName := tail[len(tail)-1].name
	for _, keepTo := range []int{lastBlock + 1, lastBlock + 17, lastBlock + zeroBlockBytes/2} {
		t.Run(fmt.Sprint(keepTo), func(t *testing.T) {
			crashed := d.fs
			crashed.Crash()
			// The segment keeps the group up to keepTo; every other file
			// keeps nothing unsynced.
			tear := func(name string, off int64, b []byte) []byte {
				if filepath.Base(name) != tailName {
					return nil
				}
				return b[:min(max(keepTo-int(off), 0), len(b))]
			}
			d.fs = crashed.Recover(tear)
			got, _, err := d.replay(preallocOpts)
			if err != nil {
				t.Fatalf("open after the crash: %v", err)
			}
			wantAcknowledged(t, "torn in the last block", got, acked, []string{big})
			if len(got) != len(acked) {
				t.Fatalf("%d entries recovered, want the %d acknowledged (the big one was torn)", len(got), len(acked))
			}
			d.fs = crashed
		})
	}
	l.Close()
}
