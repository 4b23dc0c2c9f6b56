package wal

import (
	"time"

	"github.com/idemdb/idem/internal/tidwall"
)

// The log's latency and group-size histograms (Stats.FsyncDuration,
// Stats.GroupEntries). Their bounds are named here once; an exporter reads
// them from the snapshots.

// fsyncBounds are the buckets of Stats.FsyncDuration: from 50µs, a fast
// NVMe flush, through the milliseconds of SATA SSDs and spinning disks, to
// 10s, a device stalling (anything slower is +Inf). Steps of about 2–2.5×
// keep a shift of the distribution visible in neighbouring buckets.
var fsyncBounds = DurationBounds(
	50*time.Microsecond, 100*time.Microsecond, 250*time.Microsecond, 500*time.Microsecond,
	time.Millisecond, 2500*time.Microsecond, 5*time.Millisecond,
	10*time.Millisecond, 25*time.Millisecond, 50*time.Millisecond,
	100*time.Millisecond, 250*time.Millisecond, 500*time.Millisecond,
	time.Second, 2500*time.Millisecond, 5*time.Second, 10*time.Second,
)

// groupEntriesBounds are the buckets of Stats.GroupEntries: powers of two up
// to defaultGroupEntriesMax, the most entries a group takes by default. A
// chain enqueued whole, or a larger configured GroupEntriesMax, can exceed
// it: those groups are counted in +Inf.
var groupEntriesBounds = powersOfTwo(defaultGroupEntriesMax)

// powersOfTwo returns 1, 2, 4, … up to and including the largest power of
// two ≤ upTo.
func powersOfTwo(upTo int64) []int64 {
	var out []int64
	for b := int64(1); b <= upTo; b *= 2 {
		out = append(out, b)
	}
	return out
}

// timedFile times the fsyncs of a file tidwall opened: the group commit's
// (Log.tw.Sync) and tidwall's own, when it leaves a full segment and at
// Close, which the log never calls directly.
type timedFile struct {
	tidwall.File
	fsyncs *Histogram
}

func (f timedFile) Sync() error {
	start := time.Now()
	err := f.File.Sync()
	f.fsyncs.ObserveDuration(time.Since(start))
	return err
}

// syncDir fsyncs the log's directory, through the handle the log keeps
// open, and times it like a segment fsync.
func (l *Log) syncDir() error {
	start := time.Now()
	err := l.dirFile.Sync()
	l.fsyncs.ObserveDuration(time.Since(start))
	return err
}
