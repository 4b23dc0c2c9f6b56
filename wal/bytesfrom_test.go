package wal

import "testing"

// TestBytesFrom_CountsTheSegmentsHoldingEntriesFromAnIndex: from the first
// entry on, every segment's size (the tail's written bytes only); from a
// segment's first entry, it and those after; from within a segment, its
// share of that one's entries; from past the end, nothing.
func TestBytesFrom_CountsTheSegmentsHoldingEntriesFromAnIndex(t *testing.T) {
	opts := Options{SegmentBytes: 512}
	d := newMemDisk()
	l, _ := d.mustOpen(t, opts)
	defer l.Close()
	// At least 60 entries, and on until the tail holds two: a segment is
	// cycled as soon as it fills, and a log leaves its first, plain tail
	// for a spare once the preallocator has one ready, so where the
	// segments start depends on when that was (the tail after entry 60
	// was once empty).
	var n uint64
	for n < 60 || n+1 < d.segments(t)[len(d.segments(t))-1].first+2 {
		if n++; n > 1000 {
			t.Fatal("1000 entries and the tail never held two")
		}
		appendSync(t, l, body(n))
	}
	segs := d.segments(t)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	tail := int64(l.Snapshot().TailBytes)
	var all, fromSecond int64
	for i, s := range segs[:len(segs)-1] {
		fi, err := d.fs.Stat(d.path(s.name))
		if err != nil {
			t.Fatal(err)
		}
		all += fi.Size()
		if i > 0 {
			fromSecond += fi.Size()
		}
	}
	last := segs[len(segs)-1].first
	for _, c := range []struct {
		from uint64
		want int64
	}{
		{1, all + tail},
		{segs[1].first, fromSecond + tail},
		{last, tail},
		{n, tail / int64(n-last+1)},
		{n + 5, 0},
	} {
		if got := l.BytesFrom(c.from); got != c.want {
			t.Errorf("BytesFrom(%d) = %d, want %d", c.from, got, c.want)
		}
	}
}

// TestBytesFrom_TheLastFewEntriesOfABigTailCountFew: a checkpoint's tip
// near the tail's end leaves little to replay, and BytesFrom says so
// rather than the tail's whole size (what it once reserved room for).
func TestBytesFrom_TheLastFewEntriesOfABigTailCountFew(t *testing.T) {
	d := newMemDisk()
	l, _ := d.mustOpen(t, oneSegment)
	defer l.Close()
	const n = 200
	for i := uint64(1); i <= n; i++ {
		appendSync(t, l, body(i))
	}
	tail := int64(l.Snapshot().TailBytes)
	if got := l.BytesFrom(n - 1); got <= 0 || got > tail/50 {
		t.Fatalf("BytesFrom(%d) = %d of a %d-byte tail, want about 2 entries' worth", n-1, got, tail)
	}
}
