package wal

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/idemdb/idem/vfs"
)

// An open reads the tail segment once: repair reads it, and both
// tidwall's open and the replay take what repair read (issue 38).

// readCounter counts the read-only opens of each file under it.
type readCounter struct {
	vfs.FS
	mu    sync.Mutex
	reads map[string]int
}

func (c *readCounter) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if flag == os.O_RDONLY {
		c.mu.Lock()
		c.reads[filepath.Base(name)]++
		c.mu.Unlock()
	}
	return c.FS.OpenFile(name, flag, perm)
}

// reopenCounting opens d through a readCounter, replays every entry and
// returns the bodies, the reads per segment and the open log.
func reopenCounting(t *testing.T, d *memDisk, opts Options) ([]string, map[string]int, *Log) {
	t.Helper()
	c := &readCounter{FS: d.fs, reads: map[string]int{}}
	opts.FS = c
	l, _, err := Open(memDir, quiet(opts))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	var out []string
	err = l.Replay(1, func(_ uint64, _ Kind, b []byte) error { out = append(out, string(b)); return nil })
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	return out, c.reads, l
}

func TestOpen_ReadsEachSegmentOnceWithItsReplay(t *testing.T) {
	opts := Options{SegmentBytes: 512}
	d := newMemDisk()
	l, _ := d.mustOpen(t, opts)
	const n = 60
	for i := uint64(1); i <= n; i++ {
		appendSync(t, l, body(i))
	}
	d.crash(l, nil) // no close marker: repair judges the tail
	segs := d.segments(t)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	got, reads, l := reopenCounting(t, d, opts)
	checkBodies(t, got, n)
	for _, s := range segs {
		if reads[s.name] != 1 {
			t.Errorf("segment %s read %d times by open and replay, want once", s.name, reads[s.name])
		}
	}
	// The log goes on from the tail it did not read again.
	appendSync(t, l, body(n+1))
	d.crash(l, nil)
	got, _, l = reopenCounting(t, d, opts)
	checkBodies(t, got, n+1)
	l.Close()
}

func TestOpen_ACutTailIsReplayedAndWrittenOnFromTheCut(t *testing.T) {
	d := newMemDisk()
	l, _ := d.mustOpen(t, oneSegment)
	acked := groupedLog(t, d, l, 6)
	d.crash(l, nil)
	seg := d.segments(t)[0]
	data := d.read(t, seg.name)
	end := spansOf(t, data)[len(acked)-1].end
	// A final group torn inside its first frame: a length prefix
	// promising more than follows.
	d.write(t, seg.name, append(data[:end:end], 0x7f, 'x'))
	got, reads, l := reopenCounting(t, d, oneSegment)
	checkBodies(t, got, len(acked))
	if reads[seg.name] != 1 {
		t.Errorf("the cut tail was read %d times by open and replay, want once", reads[seg.name])
	}
	appendSync(t, l, body(uint64(len(acked)+1)))
	d.crash(l, nil)
	got, _, l = reopenCounting(t, d, oneSegment)
	checkBodies(t, got, len(acked)+1)
	l.Close()
}
