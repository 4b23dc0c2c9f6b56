package wal

import "testing"

// TestBytesFrom_CountsTheSegmentsHoldingEntriesFromAnIndex: from the first
// entry on, every segment's size (the tail's written bytes only); from an
// entry of the tail on, the tail's; from past the end, still the tail's.
func TestBytesFrom_CountsTheSegmentsHoldingEntriesFromAnIndex(t *testing.T) {
	opts := Options{SegmentBytes: 512}
	d := newMemDisk()
	l, _ := d.mustOpen(t, opts)
	defer l.Close()
	const n = 60
	for i := uint64(1); i <= n; i++ {
		appendSync(t, l, body(i))
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
	}{{1, all + tail}, {segs[1].first - 1, all + tail}, {segs[1].first, fromSecond + tail}, {last, tail}, {n + 5, tail}} {
		if got := l.BytesFrom(c.from); got != c.want {
			t.Errorf("BytesFrom(%d) = %d, want %d", c.from, got, c.want)
		}
	}
}
