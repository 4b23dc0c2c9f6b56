package wal

import (
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/idemdb/idem/vfs/memfs"
)

// Verify (verify.go) must judge a log exactly as Open and a full Replay
// do — the same cut of a torn tail, the same refusal of anything else —
// and change nothing while it does.

// logFiles is every file of the log directory by name.
func logFiles(t *testing.T, d *memDisk) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range d.names(t) {
		out[name] = string(d.read(t, name))
	}
	return out
}

// verifyAgrees verifies the log on d, then opens and replays it, and
// asserts both found the same thing. It returns Verify's report.
func verifyAgrees(t *testing.T, what string, d *memDisk, opts Options) VerifyReport {
	t.Helper()
	before := logFiles(t, d)
	opts.FS = d.fs
	var frames uint64
	vr, err := Verify(memDir, opts, func(VerifiedEntry) { frames++ })
	if err != nil {
		t.Fatalf("%s: verify: %v", what, err)
	}
	if !maps.Equal(before, logFiles(t, d)) {
		t.Fatalf("%s: verify changed the log directory", what)
	}
	opts.FS = nil
	got, rep, err := d.replay(opts)
	var ce *CorruptionError
	switch {
	case err == nil:
		if len(vr.Damage) > 0 || vr.Torn.Segment != rep.Segment || vr.Torn.CutOffset != rep.CutOffset {
			t.Fatalf("%s: open cut %+v and replayed; verify found torn %+v, damage %v", what, rep, vr.Torn, vr.Damage)
		}
		if vr.LastIndex != uint64(len(got)) || frames < uint64(len(got)) {
			t.Fatalf("%s: open kept entries 1..%d; verify says ..%d after reading %d frames", what, len(got), vr.LastIndex, frames)
		}
	case errors.As(err, &ce):
		for _, d := range vr.Damage {
			if d.Path == ce.Path && d.Offset == ce.Offset && d.Index == ce.Index {
				return vr
			}
		}
		t.Fatalf("%s: open refused with %v; verify found %v", what, err, vr.Damage)
	default:
		t.Fatalf("%s: open: %v", what, err)
	}
	return vr
}

func TestVerify_CutsEveryTornFinalGroupAsOpenDoes(t *testing.T) {
	d := newMemDisk()
	l, _ := d.mustOpen(t, oneSegment)
	acked := groupedLog(t, d, l, 9)
	inFlight(t, d, l, uint64(len(acked)+1), 4)
	crashed := d.crash(l, nil)
	unsynced := crashed.Unsynced()[d.path(d.segments(t)[0].name)]
	torn := 0
	for k := 0; k <= unsynced; k++ {
		for name, tear := range map[string]memfs.Tear{"prefix": memfs.KeepUnsynced(k), "zero-fill": memfs.ZeroFill(k, zeroBlockBytes)} {
			d.fs = crashed.Recover(tear)
			if vr := verifyAgrees(t, fmt.Sprintf("%s cut %d", name, k), d, oneSegment); vr.Torn.Segment != "" {
				torn++
			}
		}
	}
	if torn == 0 {
		t.Fatal("no cut of the in-flight group was judged torn")
	}
}

func TestVerify_RefusesDamageAsOpenDoes(t *testing.T) {
	d, seg := cleanlyClosedLog(t)
	orig := d.read(t, seg.name)
	clean := d.fs.Recover(memfs.KeepAll)
	for gi, ps := range groupsOf(t, orig, 9) {
		for _, p := range ps {
			d.fs = clean.Recover(memfs.KeepAll)
			d.write(t, seg.name, flipped(orig, p.offset))
			if vr := verifyAgrees(t, fmt.Sprintf("group %d %s", gi, p.what), d, oneSegment); len(vr.Damage) == 0 {
				t.Fatalf("group %d %s: no damage after a clean close", gi, p.what)
			}
		}
	}
}

func TestVerify_ReadsEverySegmentAndFindsDamageInAnOlderOne(t *testing.T) {
	small := Options{SegmentBytes: 256}
	d := newMemDisk()
	l, _ := d.mustOpen(t, small)
	groupedLog(t, d, l, 24)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs := d.segments(t)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	clean := d.fs.Recover(memfs.KeepAll)
	d.fs = clean.Recover(memfs.KeepAll)
	vr := verifyAgrees(t, "clean", d, small)
	if len(vr.Segments) != len(segs) || vr.Marker != MarkerClean || vr.FirstIndex != 1 {
		t.Fatalf("clean log: %+v", vr)
	}
	// The first, a middle and the last segment with entries: the log may
	// have closed just after starting an empty segment, with nothing to damage.
	all := len(segs)
	for len(segs) > 1 && len(d.read(t, segs[len(segs)-1].name)) == 0 {
		segs = segs[:len(segs)-1]
	}
	for _, s := range []segmentFile{segs[0], segs[len(segs)/2], segs[len(segs)-1]} {
		d.fs = clean.Recover(memfs.KeepAll)
		data := d.read(t, s.name)
		d.write(t, s.name, flipped(data, len(data)/2))
		vr := verifyAgrees(t, "damaged "+s.name, d, small)
		if len(vr.Damage) != 1 || vr.Damage[0].Segment != s.name || len(vr.Segments) != all {
			t.Fatalf("damaged %s: damage %v, %d segments read", s.name, vr.Damage, len(vr.Segments))
		}
	}
	// Damage in two segments: both are found, where Open stops at one.
	d.fs = clean.Recover(memfs.KeepAll)
	for _, s := range []segmentFile{segs[0], segs[1]} {
		data := d.read(t, s.name)
		d.write(t, s.name, flipped(data, len(data)/2))
	}
	if vr, err := Verify(memDir, Options{FS: d.fs}, nil); err != nil || len(vr.Damage) != 2 {
		t.Fatalf("two damaged segments: %v, %v", vr.Damage, err)
	}
}
