package wal

import (
	"bytes"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemdb/idem/vfs"
)

// TestHistogram_CumulativeInclusiveBuckets: a value equal to a bound
// counts in that bound's bucket, values above every bound only in Count,
// and Cumulative, Count and Sum are those of a Prometheus histogram.
func TestHistogram_CumulativeInclusiveBuckets(t *testing.T) {
	h := NewHistogram([]int64{1, 2, 4})
	for _, v := range []int64{0, 1, 2, 3, 4, 5, 100} {
		h.Observe(v)
	}
	s := h.Snapshot()
	if !slices.Equal(s.Bounds, []int64{1, 2, 4}) || !slices.Equal(s.Cumulative, []uint64{2, 3, 5}) || s.Count != 7 || s.Sum != 115 {
		t.Fatalf("snapshot %+v", s)
	}
	s.Bounds[0] = 99 // a snapshot is the caller's
	if h.Snapshot().Bounds[0] != 1 {
		t.Fatal("changing a snapshot's bounds changed the histogram's")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("NewHistogram accepted bounds that are not ascending")
		}
	}()
	NewHistogram([]int64{1, 1})
}

// TestHistogram_ConcurrentObservationsAllCount: observations from many
// goroutines are neither lost nor double-counted (run under -race).
func TestHistogram_ConcurrentObservationsAllCount(t *testing.T) {
	const (
		writers = 8    // enough to contend on every bucket
		each    = 1000 // per writer: a few thousand adds in all, fast under -race
	)
	h := NewHistogram(groupEntriesBounds)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				h.Observe(int64(w*each + i))
			}
		}()
	}
	wg.Wait()
	s := h.Snapshot()
	n := int64(writers * each)
	if s.Count != uint64(n) || s.Sum != n*(n-1)/2 || s.Cumulative[0] != 2 { // 0 and 1 are ≤ 1
		t.Fatalf("count %d sum %d first bucket %d; want %d, %d, 2", s.Count, s.Sum, s.Cumulative[0], n, n*(n-1)/2)
	}
}

// syncCountingFS counts every fsync, of files and of directories, that
// reaches the file system — but a spare's, made off the write path before
// the spare is a segment (prealloc.go: its first, the one fsync of its
// preparation; the same descriptor then writes the segment).
type syncCountingFS struct {
	vfs.FS
	syncs *atomic.Uint64
}

type syncCountingFile struct {
	vfs.File
	syncs     *atomic.Uint64
	skipFirst *atomic.Bool // a spare's: its preparation's fsync is not counted
}

func (f syncCountingFile) Sync() error {
	if f.skipFirst == nil || !f.skipFirst.Swap(false) {
		f.syncs.Add(1)
	}
	return f.File.Sync()
}

func (c syncCountingFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return f, err
	}
	cf := syncCountingFile{File: f, syncs: c.syncs}
	if filepath.Base(name) == spareTempName {
		cf.skipFirst = new(atomic.Bool)
		cf.skipFirst.Store(true)
	}
	return cf, nil
}

func (c syncCountingFS) OpenDir(name string) (vfs.File, error) {
	f, err := c.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return syncCountingFile{File: f, syncs: c.syncs}, nil
}

// TestStats_EveryFsyncIsTimed: Stats.Fsyncs and FsyncDuration count exactly
// the fsyncs the file system sees while the log writes, tidwall's own at a
// segment cycle and the directory's included; GroupEntries sizes every
// group.
func TestStats_EveryFsyncIsTimed(t *testing.T) {
	const (
		segmentBytes = 4096 // small, so that the writes below cycle segments
		singles      = 60   // one-entry groups...
		bodyBytes    = 256  // ...of 256 bytes: about four segments' worth
	)
	var syncs atomic.Uint64
	l, _ := openLogT(t, t.TempDir(), Options{SegmentBytes: segmentBytes, FS: syncCountingFS{vfs.Default, &syncs}})
	defer l.Close()
	before, seen := l.Stats(), syncs.Load()
	for range singles {
		appendSync(t, l, bytes.Repeat([]byte("x"), bodyBytes))
	}
	if err := appendGroup(l, []byte("a"), []byte("b"), []byte("c")); err != nil {
		t.Fatal(err)
	}
	after := l.Stats()
	fsyncs := after.Fsyncs - before.Fsyncs
	if saw := syncs.Load() - seen; fsyncs != saw {
		t.Fatalf("Stats.Fsyncs grew by %d, the file system saw %d fsyncs", fsyncs, saw)
	}
	groups := after.Groups - before.Groups
	if groups != singles+1 || fsyncs <= groups {
		t.Fatalf("%d groups took %d fsyncs; want %d groups, and segment cycles' fsyncs beyond one per group", groups, fsyncs, singles+1)
	}
	d := after.FsyncDuration
	if d.Count != after.Fsyncs || d.Sum <= 0 || !slices.Equal(d.Bounds, fsyncBounds) {
		t.Fatalf("FsyncDuration count %d sum %v bounds %v; Fsyncs %d", d.Count, time.Duration(d.Sum), d.Bounds, after.Fsyncs)
	}
	g := after.GroupEntries
	if g.Count != after.Groups || uint64(g.Sum) != after.Entries || g.Cumulative[0] != singles || g.Cumulative[2] != singles+1 {
		t.Fatalf("GroupEntries %+v; Groups %d, Entries %d", g, after.Groups, after.Entries)
	}
}
