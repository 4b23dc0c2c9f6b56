package wal

import (
	"log/slog"
	"time"

	"github.com/idemdb/idem/vfs"
)

// Options configure a Log. Zero fields take the defaults below.
type Options struct {
	// SegmentBytes is the target size of one segment file. Front truncation
	// removes whole segments only, so this is also the slack the log keeps
	// before a checkpoint lets it go.
	SegmentBytes int
	// GroupEntriesMax bounds how many entries one group commit writes.
	GroupEntriesMax int
	// GroupBytesMax bounds the frame bytes of one group commit. It is also the
	// largest torn tail that repair on open accepts.
	GroupBytesMax int
	// QueueEntriesMax bounds entries reserved but not yet durable; Reserve
	// blocks beyond it.
	QueueEntriesMax int
	// OnDurable, if set, is called by the writer goroutine after each group is
	// durable, with the group's entries in log order, before any appender of
	// the group is released. It must not call back into the Log.
	OnDurable func(entries []Entry)
	// Logger receives repair and fail-stop reports.
	Logger *slog.Logger
	// FS is the file system the log lives on; nil means vfs.Default.
	FS vfs.FS
	// GroupLinger is how long the writer holds a group open for more
	// entries while every core is busy (linger.go): 0 takes the default,
	// a negative value never lingers.
	GroupLinger time.Duration
	// NoPreallocation writes each segment as a growing file instead of
	// into one written full of zeros beforehand (prealloc.go), for a disk
	// too small to hold a spare segment.
	NoPreallocation bool
}

const (
	defaultSegmentBytes    = 8 << 20
	defaultGroupEntriesMax = 1024
	defaultGroupBytesMax   = 4 << 20
	defaultQueueEntriesMax = 8192
)

func (o Options) withDefaults() Options {
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = defaultSegmentBytes
	}
	if o.GroupEntriesMax <= 0 {
		o.GroupEntriesMax = defaultGroupEntriesMax
	}
	if o.GroupBytesMax <= 0 {
		o.GroupBytesMax = defaultGroupBytesMax
	}
	if o.QueueEntriesMax <= 0 {
		o.QueueEntriesMax = defaultQueueEntriesMax
	}
	if o.GroupLinger == 0 {
		o.GroupLinger = DefaultGroupLinger
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	return o
}
