package wal

import "path/filepath"

// Snapshot names the log's files as of one group boundary, for a backup
// (engine/backup.go): the sealed segments, whose bytes never change again
// (only removed by TruncateFront), and the tail, of which only the first
// TailBytes are the log up to LastIndex. A copy of exactly these bytes is a
// log a crash could have left, cut at a group boundary: Open takes it as is.
type Snapshot struct {
	Sealed    []string // paths of the segments before the tail, oldest first
	Tail      string   // path of the tail segment
	TailBytes int64    // bytes of Tail written and fsynced by the last group
	LastIndex uint64   // index of the last entry in them (durable)
}

// Snapshot returns the log's files as of the last group written. The
// caller must keep TruncateFront from running until it has copied or
// linked the sealed segments (the engine holds its checkpoint lock).
func (l *Log) Snapshot() Snapshot {
	l.ioMu.Lock()
	defer l.ioMu.Unlock()
	s := Snapshot{LastIndex: l.written, TailBytes: int64(l.tailBytes)}
	for i, seg := range l.segs {
		p := filepath.Join(l.dir, seg.name)
		if i == len(l.segs)-1 {
			s.Tail = p
			continue
		}
		s.Sealed = append(s.Sealed, p)
	}
	return s
}

// BytesFrom is about how many bytes the log holds from entry index on:
// the sizes of the segments after the one holding it, and of that one (the
// tail's written bytes, if it is the tail) the share of its entries at or
// after index. Recovery sizes what the replay may add by it before
// replaying (engine/replayoverlay.go, the dirty set's reserve), and what
// it over-counts stays allocated until the next checkpoint or for the
// store's life: counting the whole of the segment holding index, a
// checkpoint's tip near the end of a 64 MB tail reserved room for a
// segment's worth of writes that never came. A segment it cannot stat
// counts nothing.
func (l *Log) BytesFrom(index uint64) int64 {
	l.ioMu.Lock()
	segs := append([]segmentFile(nil), l.segs...)
	tail := int64(l.tailBytes)
	l.ioMu.Unlock()
	last := l.LastIndex()
	var n int64
	for i, s := range segs {
		end := last // the last entry s holds
		if i < len(segs)-1 {
			end = segs[i+1].first - 1
		}
		if end < index || end < s.first {
			continue // every entry of s is before index
		}
		size := tail
		if i < len(segs)-1 {
			fi, err := l.opts.FS.Stat(filepath.Join(l.dir, s.name))
			if err != nil {
				continue
			}
			size = fi.Size()
		}
		if index > s.first {
			size = size * int64(end-index+1) / int64(end-s.first+1)
		}
		n += size
	}
	return n
}
