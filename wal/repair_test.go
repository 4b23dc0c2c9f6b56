package wal

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/idemdb/idem/vfs/errorfs"
	"github.com/idemdb/idem/vfs/memfs"
)

// Repair on open (docs/design.md §3): only the final group write, which may have
// been in flight at a crash, may be cut, and only when no valid frame
// follows the damage and the log was not closed cleanly. Anything else
// refuses the open with a *CorruptionError naming file, offset and entry,
// and changes nothing.

var oneSegment = Options{SegmentBytes: 1 << 20}

// groupedLog writes groups of 1, 3 and 2 entries in turn (acknowledged)
// and returns the bodies in log order.
func groupedLog(t *testing.T, d *memDisk, l *Log, groups int) []string {
	t.Helper()
	var bodies []string
	for g := 0; g < groups; g++ {
		var batch [][]byte
		for range []int{1, 3, 2}[g%3] {
			b := body(uint64(len(bodies) + 1))
			bodies = append(bodies, string(b))
			batch = append(batch, b)
		}
		if err := appendGroup(l, batch...); err != nil {
			t.Fatal(err)
		}
	}
	return bodies
}

// inFlight writes one more group whose fsync fails: its bytes are written,
// never acknowledged.
func inFlight(t *testing.T, d *memDisk, l *Log, first uint64, n int) {
	t.Helper()
	d.efs.Add(errorfs.Rule{Op: errorfs.OpSync, Err: errorfs.EIO})
	var batch [][]byte
	for i := range n {
		batch = append(batch, body(first+uint64(i)))
	}
	if err := appendGroup(l, batch...); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("group whose fsync failed: %v, want ErrAmbiguous", err)
	}
}

// wantAcknowledged checks that got starts with every acknowledged body and
// that what follows is a prefix of the unacknowledged ones.
func wantAcknowledged(t *testing.T, what string, got, acked, unacked []string) {
	t.Helper()
	if len(got) < len(acked) || !slices.Equal(got[:len(acked)], acked) {
		t.Fatalf("%s: %d entries recovered, not all %d acknowledged ones", what, len(got), len(acked))
	}
	if rest := got[len(acked):]; len(rest) > len(unacked) || !slices.Equal(rest, unacked[:len(rest)]) {
		t.Fatalf("%s: %d entries after the acknowledged ones are not a prefix of the unacknowledged", what, len(rest))
	}
}

func TestOpen_EveryCutOfTheFinalGroupIsRepaired(t *testing.T) {
	d := newMemDisk()
	l, _ := d.mustOpen(t, oneSegment)
	acked := groupedLog(t, d, l, 9)
	var unacked []string
	for i := range 4 {
		unacked = append(unacked, string(body(uint64(len(acked)+1+i))))
	}
	inFlight(t, d, l, uint64(len(acked)+1), 4)
	crashed := d.crash(l, nil)
	seg := d.segments(t)[0]
	unsynced := crashed.Unsynced()[d.path(seg.name)]
	if unsynced == 0 {
		t.Fatal("the in-flight group left no unsynced bytes")
	}
	tears := map[string]func(k int) memfs.Tear{
		"prefix":    func(k int) memfs.Tear { return memfs.KeepUnsynced(k) },
		"zero-fill": func(k int) memfs.Tear { return memfs.ZeroFill(k, zeroBlockBytes) },
	}
	kept := map[int]bool{}
	for name, tear := range tears {
		for k := 0; k <= unsynced; k++ {
			d.fs = crashed.Recover(tear(k))
			got, rep, err := d.replay(oneSegment)
			if err != nil {
				t.Fatalf("%s cut after %d of %d unsynced bytes: %v", name, k, unsynced, err)
			}
			wantAcknowledged(t, fmt.Sprintf("%s cut %d", name, k), got, acked, unacked)
			kept[len(got)-len(acked)] = true
			if rep.Segment != "" && rep.TornCopy == "" {
				t.Fatalf("cut %d: repaired without keeping the cut bytes: %+v", k, rep)
			}
			// Repaired once: a second open finds nothing to cut, and the
			// log takes new entries at the next index.
			l, rep := d.mustOpen(t, oneSegment)
			if rep.Segment != "" {
				t.Fatalf("%s cut %d: second open repaired again: %+v", name, k, rep)
			}
			if idx := appendSync(t, l, []byte("after")); idx != uint64(len(got)+1) {
				t.Fatalf("append after repair at %d, want %d", idx, len(got)+1)
			}
			l.Close()
		}
	}
	for n := 0; n <= len(unacked); n++ {
		if !kept[n] {
			t.Errorf("no cut recovered exactly %d of the in-flight group's entries", n)
		}
	}
}

// position is a byte of a segment worth damaging.
type position struct {
	what   string
	offset int
}

// groupsOf splits a segment's frames into its group writes (a head starts
// each) and returns, for the first, a middle and the last group, bytes of
// each part of a frame: length prefix, magic, kind, flags, checksum, the
// head's length field, the body's first, middle and last byte.
func groupsOf(t *testing.T, data []byte, groups int) [][]position {
	t.Helper()
	var spans [][]span
	for _, sp := range spansOf(t, data) {
		if data[sp.frame+4]&flagHead != 0 {
			spans = append(spans, nil)
		}
		spans[len(spans)-1] = append(spans[len(spans)-1], sp)
	}
	if len(spans) != groups {
		t.Fatalf("segment holds %d group writes, want %d", len(spans), groups)
	}
	var out [][]position
	for _, g := range [][]span{spans[0], spans[len(spans)/2], spans[len(spans)-1]} {
		var ps []position
		for i, sp := range g {
			bodyAt := sp.frame + frameHeader
			if i == 0 {
				ps = append(ps, position{"head length field", sp.frame + frameHeader + 1})
				bodyAt += framePartLen
			}
			ps = append(ps,
				position{"length prefix", sp.start}, position{"magic", sp.frame}, position{"kind", sp.frame + 3},
				position{"flags", sp.frame + 4}, position{"checksum", sp.frame + frameCRCStart + 2},
				position{"body start", bodyAt}, position{"body middle", (bodyAt + sp.end) / 2}, position{"body end", sp.end - 1})
		}
		out = append(out, ps)
	}
	return out
}

// cleanlyClosedLog writes nine groups into one segment and closes the log.
func cleanlyClosedLog(t *testing.T) (*memDisk, segmentFile) {
	t.Helper()
	d := newMemDisk()
	l, _ := d.mustOpen(t, oneSegment)
	groupedLog(t, d, l, 9)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return d, d.segments(t)[0]
}

func flipped(data []byte, off int) []byte {
	b := append([]byte(nil), data...)
	b[off] ^= 0x5a
	return b
}

func TestOpen_AnyDamageAfterACleanCloseIsRefused(t *testing.T) {
	d, seg := cleanlyClosedLog(t)
	orig := d.read(t, seg.name)
	clean := d.fs.Recover(memfs.KeepAll)
	for gi, ps := range groupsOf(t, orig, 9) {
		for _, p := range ps {
			d.fs = clean.Recover(memfs.KeepAll)
			damaged := flipped(orig, p.offset)
			d.write(t, seg.name, damaged)
			before := d.names(t)
			_, _, err := d.replay(oneSegment)
			ce := wantCorruption(t, err)
			if ce.Path != d.path(seg.name) || ce.Offset > int64(p.offset) || ce.Index == 0 {
				t.Fatalf("group %d %s (offset %d): corruption %+v does not name the file, the damage and the entry", gi, p.what, p.offset, ce)
			}
			if !strings.Contains(err.Error(), "truncate -s") || !strings.Contains(err.Error(), "backup") {
				t.Fatalf("the error does not say what an operator can do: %v", err)
			}
			if !bytes.Equal(d.read(t, seg.name), damaged) || !slices.Equal(d.names(t), before) {
				t.Fatalf("group %d %s: refusing to open changed the log directory", gi, p.what)
			}
		}
	}
}

func TestOpen_ASegmentCutShortAfterACleanCloseIsRefused(t *testing.T) {
	d, seg := cleanlyClosedLog(t)
	data := d.read(t, seg.name)
	sp := spansOf(t, data)
	d.write(t, seg.name, data[:sp[len(sp)-2].start]) // a clean frame boundary
	_, _, err := d.replay(oneSegment)
	if ce := wantCorruption(t, err); !strings.Contains(ce.Reason, "closed cleanly") {
		t.Fatalf("corruption %+v does not say the log was closed cleanly", ce)
	}
}

// After a crash with a group in flight, damage to an acknowledged group is
// followed by the in-flight group's frames: refused. Damage to the
// in-flight group may be cut. Either way nothing acknowledged is lost.
func TestOpen_DamageAfterACrashNeverLosesAnAcknowledgedWrite(t *testing.T) {
	d := newMemDisk()
	l, _ := d.mustOpen(t, oneSegment)
	acked := groupedLog(t, d, l, 8)
	inFlight(t, d, l, uint64(len(acked)+1), 3)
	crashed := d.crash(l, memfs.KeepAll)
	seg := d.segments(t)[0]
	orig := d.read(t, seg.name)
	refused, opened := 0, 0
	for gi, ps := range groupsOf(t, orig, 9) {
		for _, p := range ps {
			d.fs = crashed.Recover(memfs.KeepAll)
			d.write(t, seg.name, flipped(orig, p.offset))
			got, _, err := d.replay(oneSegment)
			inFlightGroup := gi == 2
			switch {
			case err != nil:
				wantCorruption(t, err)
				refused++
			case !inFlightGroup:
				t.Fatalf("group %d %s (offset %d): damage to an acknowledged group was cut", gi, p.what, p.offset)
			default:
				wantAcknowledged(t, p.what, got, acked, nil)
				opened++
			}
		}
	}
	t.Logf("%d damaged opens refused, %d cut the in-flight group", refused, opened)

	// The in-flight group torn short: damage to the acknowledged groups is
	// still refused, since the damaged group is followed by bytes.
	unsynced := crashed.Unsynced()[d.path(seg.name)]
	for gi, ps := range groupsOf(t, orig, 9)[:2] {
		for _, p := range ps {
			d.fs = crashed.Recover(memfs.KeepUnsynced(unsynced - 5))
			data := d.read(t, seg.name)
			d.write(t, seg.name, flipped(data, p.offset))
			if _, _, err := d.replay(oneSegment); err == nil {
				t.Fatalf("torn in-flight group, damage to acknowledged group %d %s was cut", gi, p.what)
			}
		}
	}
}

// After a process kill the page cache reaches the disk: the final group
// is whole, so damage to it is not a torn write, whatever byte it hit.
func TestOpen_DamageToAWholeFinalGroupIsRefused(t *testing.T) {
	d := newMemDisk()
	l, _ := d.mustOpen(t, oneSegment)
	groupedLog(t, d, l, 9)
	crashed := d.crash(l, memfs.KeepAll)
	seg := d.segments(t)[0]
	orig := d.read(t, seg.name)
	last := groupsOf(t, orig, 9)[2]
	for _, p := range last {
		d.fs = crashed.Recover(memfs.KeepAll)
		d.write(t, seg.name, flipped(orig, p.offset))
		if _, _, err := d.replay(oneSegment); err == nil {
			t.Fatalf("%s (offset %d) of an acknowledged, whole final group was cut", p.what, p.offset)
		} else {
			wantCorruption(t, err)
		}
	}
}

// TestOpen_ZerosAfterTheEntriesAreFill: zeros from an entry boundary to
// the end — a preallocated segment's fill, or a crash that made a size
// durable and none of the data — are no entry, whatever their length:
// nothing is cut, every entry replays, and the next write lands where the
// entries end.
func TestOpen_ZerosAfterTheEntriesAreFill(t *testing.T) {
	d := newMemDisk()
	opts := Options{SegmentBytes: 1 << 20, GroupBytesMax: 256, NoPreallocation: true}
	l, _ := d.mustOpen(t, opts)
	groupedLog(t, d, l, 6)
	crashed := d.crash(l, nil)
	seg := d.segments(t)[0]
	orig := d.read(t, seg.name)
	for _, zeros := range []int{1, 100, 512, 4096, 3 << 16} {
		d.fs = crashed.Recover(nil)
		d.write(t, seg.name, append(append([]byte(nil), orig...), make([]byte, zeros)...))
		l, rep, err := d.open(opts)
		if err != nil || rep.Segment != "" {
			t.Fatalf("%d zeros: %+v, %v; want an open that cuts nothing", zeros, rep, err)
		}
		var got int
		if err := l.Replay(1, func(uint64, Kind, []byte) error { got++; return nil }); err != nil || got != 12 {
			t.Fatalf("%d zeros: replayed %d entries, %v; want 12", zeros, got, err)
		}
		appendSync(t, l, body(13))
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		data := d.read(t, seg.name)
		r, _ := scanSegment(data, seg.first, nil)
		if r.err != nil || r.entries != 13 || len(data) != max(len(orig)+zeros, r.validEnd) {
			t.Fatalf("%d zeros, then entry 13: %+v over %d bytes; want 13 entries written over the zeros", zeros, r, len(data))
		}
	}
}

func TestOpen_CutBytesAreBoundedAndRepeatedFailedOpensLeaveNoJunk(t *testing.T) {
	d := newMemDisk()
	l, _ := d.mustOpen(t, oneSegment)
	acked := groupedLog(t, d, l, 6)
	inFlight(t, d, l, uint64(len(acked)+1), 2)
	crashed := d.crash(l, memfs.KeepUnsynced(30))
	d.fs = crashed.Recover(memfs.KeepUnsynced(30))
	for range 5 {
		// Every open fails after keeping the cut bytes, before cutting.
		d.efs = nil
		ef := errorfs.Wrap(d.fs, errorfs.Rule{Op: errorfs.OpTruncate, Err: errorfs.EIO})
		opts := oneSegment
		opts.FS = ef
		if _, _, err := Open(memDir, quiet(opts)); err == nil {
			t.Fatal("open with a failing truncate succeeded")
		}
	}
	names := d.names(t)
	got, rep, err := d.replay(oneSegment)
	if err != nil {
		t.Fatal(err)
	}
	wantAcknowledged(t, "after failed opens", got, acked, nil)
	var torn []string
	for _, n := range d.names(t) {
		if strings.Contains(n, tornInfix) {
			torn = append(torn, n)
		}
	}
	if len(torn) != 1 || d.path(torn[0]) != rep.TornCopy {
		t.Fatalf("after 5 failed opens and one good one: cut-byte files %v (before the good one: %v), report %+v", torn, names, rep)
	}
	if n := len(d.read(t, torn[0])); n != int(rep.DroppedLen) || n > tornKeepBytesMax {
		t.Fatalf("kept %d cut bytes, dropped %d", n, rep.DroppedLen)
	}
}

// A full disk must not keep a store from opening: cutting a torn tail
// needs no free space, and a failed write fail-stops until space is freed.
func TestOpen_OnAFullDiskCutsWithoutSpaceAndRecoversOnceFreed(t *testing.T) {
	d := newMemDisk()
	l, _ := d.mustOpen(t, oneSegment)
	acked := groupedLog(t, d, l, 6)
	d.fs.SetCapacity(d.fs.Used() + 40) // room for part of one more group
	err := appendGroup(l, body(100), body(101))
	if !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("append on a full disk: %v, want ErrAmbiguous", err)
	}
	d.crash(l, memfs.KeepAll)
	d.fs.SetCapacity(d.fs.Used()) // still full after the restart
	l, rep := d.mustOpen(t, oneSegment)
	if rep.Segment == "" || rep.TornCopy != "" {
		t.Fatalf("repair on a full disk: %+v, want a cut without a kept copy", rep)
	}
	d.fs.SetCapacity(d.fs.Used())
	if err := appendGroup(l, body(200)); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("append while still full: %v, want ErrAmbiguous", err)
	}
	d.crash(l, memfs.KeepAll)
	d.fs.SetCapacity(0) // space freed
	l, _ = d.mustOpen(t, oneSegment)
	if err := appendGroup(l, body(300)); err != nil {
		t.Fatalf("append once space is freed: %v", err)
	}
	l.Close()
	got, _, err := d.replay(oneSegment)
	if err != nil {
		t.Fatal(err)
	}
	wantAcknowledged(t, "after freeing space", got[:len(got)-1], acked, nil)
	if got[len(got)-1] != string(body(300)) {
		t.Fatalf("last entry %q, want the one written after freeing space", got[len(got)-1])
	}
}

func TestOpen_ADamagedCloseMarkerOnAnIntactLogOpens(t *testing.T) {
	d := newMemDisk()
	l, _ := d.mustOpen(t, oneSegment)
	acked := groupedLog(t, d, l, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	d.write(t, markerName, []byte("garbage"))
	l, _ = d.mustOpen(t, oneSegment)
	if slices.Contains(d.names(t), markerName) {
		t.Fatal("the damaged marker outlived the open")
	}
	l.Close()
	got, _, err := d.replay(oneSegment)
	if err != nil || !slices.Equal(got, acked) {
		t.Fatalf("intact log with a damaged marker: %d entries, %v", len(got), err)
	}
}

// The marker goes, durably, before the first write after an open: a crash
// then is a crash, and its torn tail is cut, not refused.
func TestOpen_TheCloseMarkerDoesNotOutliveTheOpen(t *testing.T) {
	d := newMemDisk()
	l, _ := d.mustOpen(t, oneSegment)
	acked := groupedLog(t, d, l, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, _ = d.mustOpen(t, oneSegment)
	inFlight(t, d, l, uint64(len(acked)+1), 2)
	d.crash(l, memfs.KeepUnsynced(25))
	got, rep, err := d.replay(oneSegment)
	if err != nil || rep.Segment == "" {
		t.Fatalf("torn tail after a reopened clean close: %+v, %v", rep, err)
	}
	wantAcknowledged(t, "reopened", got, acked, nil)
}

// Older segments are fsynced before the next one starts, so no damage
// there is ever a torn write.
func TestOpen_DamageBeforeTheLastSegmentIsCorruption(t *testing.T) {
	opts := Options{SegmentBytes: 1024}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, data []byte) []byte
	}{
		{"cut mid-frame", func(t *testing.T, data []byte) []byte { sp := spansOf(t, data); return data[:sp[len(sp)-1].end-3] }},
		{"cut at a frame boundary", func(t *testing.T, data []byte) []byte { sp := spansOf(t, data); return data[:sp[len(sp)-1].start] }},
		{"flipped byte", func(t *testing.T, data []byte) []byte { return flipped(data, spansOf(t, data)[2].frame+frameHeader+2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newMemDisk()
			l, _ := d.mustOpen(t, opts)
			groupedLog(t, d, l, 40)
			d.crash(l, nil) // not a clean close: only the tail may be torn
			segs := d.segments(t)
			if len(segs) < 3 {
				t.Fatalf("want at least 3 segments, have %d", len(segs))
			}
			seg := segs[1]
			d.write(t, seg.name, tc.damage(t, d.read(t, seg.name)))
			before := d.names(t)
			_, _, err := d.replay(opts)
			if ce := wantCorruption(t, err); ce.Segment != seg.name {
				t.Fatalf("corruption names segment %q, want %q", ce.Segment, seg.name)
			}
			if !slices.Equal(d.names(t), before) {
				t.Fatal("refusing to open changed the log directory")
			}
		})
	}
}

func TestReplay_MissingFrontIsCorruption(t *testing.T) {
	opts := Options{SegmentBytes: 1024}
	d := newMemDisk()
	l, _ := d.mustOpen(t, opts)
	groupedLog(t, d, l, 40)
	l.Close()
	segs := d.segments(t)
	if err := d.fs.Remove(d.path(segs[0].name)); err != nil {
		t.Fatal(err)
	}
	_, _, err := d.replay(opts)
	if ce := wantCorruption(t, err); ce.Index != 1 || ce.Segment != segs[1].name {
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
