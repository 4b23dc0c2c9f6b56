package wal

import (
	"encoding/binary"
	"strings"
	"testing"
)

// TestJudgeTail_TornOrCorrupt walks the rules of judgeTail as data: each
// row is what repair found at the end of the last segment, and whether a
// crash can explain it (cut) or only damage to written bytes can (refuse).
func TestJudgeTail_TornOrCorrupt(t *testing.T) {
	base := tailFacts{size: 10_000, damageAt: 9_000, followAt: -1, partStart: 8_800, partEnd: 10_400,
		claimEnd: -1, zeroFrom: 10_000, maxTornBytes: 1 << 20}
	with := func(f func(*tailFacts)) tailFacts { c := base; f(&c); return c }
	for _, tc := range []struct {
		name  string
		facts tailFacts
		cut   bool
		why   string // a word the reason must contain
	}{
		{"final group cut short", base, true, "torn"},
		{"final group cut short, then zero-filled blocks", with(func(f *tailFacts) { f.size, f.zeroFrom = 10_400, 9_216 }), true, "torn"},
		{"closed cleanly", with(func(f *tailFacts) { f.closed = closedCleanly }), false, "cleanly"},
		{"close marker damaged", with(func(f *tailFacts) { f.closed = markerDamaged }), false, "marker"},
		{"a valid frame follows", with(func(f *tailFacts) { f.followAt = 9_500 }), false, "follows"},
		{"bytes past the damaged group", with(func(f *tailFacts) { f.size = 10_600; f.zeroFrom = 10_600 }), false, "later group"},
		{"damaged group whole, not zero-filled", with(func(f *tailFacts) { f.size, f.zeroFrom = 10_400, 10_400 }), false, "whole"},
		{"damage begins a group, its frame incomplete", with(func(f *tailFacts) { f.partEnd, f.damageAt, f.claimEnd = 9_000, 9_000, 12_000 }), true, "torn"},
		{"damage begins a group, all zeros", with(func(f *tailFacts) { f.partEnd, f.damageAt, f.claimEnd, f.zeroFrom = 9_000, 9_000, 9_001, 9_000 }), true, "torn"},
		{"damage begins a group, its frame whole", with(func(f *tailFacts) { f.partEnd, f.damageAt, f.claimEnd = 9_000, 9_000, 9_700 }), false, "whole"},
		{"damage begins a group, unreadable length", with(func(f *tailFacts) { f.partEnd, f.damageAt = 9_000, 9_000 }), true, "torn"},
		{"more damaged bytes than a group holds", with(func(f *tailFacts) { f.partEnd, f.damageAt, f.maxTornBytes = 9_000, 9_000, 512 }), false, "more than one group"},
		{"frames without heads (an old log), short tail", with(func(f *tailFacts) { f.partStart, f.partEnd = -1, -1 }), true, "torn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cut, why := judgeTail(tc.facts)
			if cut != tc.cut || !strings.Contains(why, tc.why) {
				t.Fatalf("judgeTail = %v %q, want %v and a reason mentioning %q", cut, why, tc.cut, tc.why)
			}
		})
	}
}

// TestValidFrameAfter_FindsTheFrameBehindADamagedLengthPrefix: when only a
// frame's length prefix is damaged, the frame itself — still at its own
// index — is found after it, and so is any later one.
func TestValidFrameAfter_FindsTheFrameBehindADamagedLengthPrefix(t *testing.T) {
	var seg []byte
	var starts []int
	for i := uint64(1); i <= 4; i++ {
		starts = append(starts, len(seg))
		fr := appendFrame(nil, i, KindBatch, body(i), 0)
		seg = append(binary.AppendUvarint(seg, uint64(len(fr))), fr...)
	}
	damaged := append([]byte(nil), seg...)
	damaged[starts[2]] = 0x7f // entry 3's length prefix
	r, _ := scanSegment(damaged, 1, nil)
	if r.err == nil || r.validEnd != starts[2] {
		t.Fatalf("scan stopped at %d (%v), want %d", r.validEnd, r.err, starts[2])
	}
	if at := validFrameAfter(damaged, r.validEnd, 3); at < 0 || at > int64(starts[3]) {
		t.Fatalf("validFrameAfter = %d, want a frame at or before %d", at, starts[3])
	}
	// Zeros and garbage hold no frame.
	junk := append(append([]byte(nil), seg[:starts[2]]...), make([]byte, 3000)...)
	for i := starts[2] + 1000; i < len(junk); i++ {
		junk[i] = byte(i * 7)
	}
	if at := validFrameAfter(junk, starts[2], 3); at >= 0 {
		t.Fatalf("found a frame at %d in zeros and garbage", at)
	}
}

// TestUnwrittenFrom_TheFillOfAPreallocatedFile: the fill of a file that
// is a whole number of blocks and ends in zeros runs back to its last
// non-zero byte, from inside the last block too (the group that fills a
// segment ends in the spare's slack), and never before at; a file that is
// not such a whole or ends in a non-zero byte has no fill.
func TestUnwrittenFrom_TheFillOfAPreallocatedFile(t *testing.T) {
	file := func(size int, written ...int) []byte {
		b := make([]byte, size)
		for _, end := range written {
			for i := range end {
				b[i] = 'x'
			}
		}
		return b
	}
	const B = zeroBlockBytes
	for _, tc := range []struct {
		name     string
		data     []byte
		at, want int
	}{
		{"written into the first block", file(3*B, 100), 50, 100},
		{"written into the last block", file(3*B, 2*B+17), 2*B - 40, 2*B + 17},
		{"written to a block boundary", file(3*B, 2*B), 10, 2 * B},
		{"nothing past at", file(3*B, 100), 300, 300},
		{"written to the end", file(2*B, 2*B), 0, 2 * B},
		{"not a whole number of blocks", file(2*B+5, 100), 0, 2*B + 5},
		{"empty", nil, 0, 0},
	} {
		if got := unwrittenFrom(tc.data, tc.at); got != tc.want {
			t.Errorf("%s: unwrittenFrom(%d bytes, %d) = %d, want %d", tc.name, len(tc.data), tc.at, got, tc.want)
		}
	}
}
