package engine

import (
	"log/slog"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/wal"
)

// Options configure a DB. Zero fields take defaults.
type Options struct {
	// CheckpointLogBytes triggers a background checkpoint once this many
	// bytes — or the size of the last checkpoint, if larger — were logged
	// since the last one. Negative disables automatic checkpoints. Default
	// 64 MiB.
	CheckpointLogBytes int64
	// CheckpointDeltasMax bounds the deltas on one base (ckptchain.go):
	// after as many, the chain is due to be merged into a new base
	// (merge.go; deltas go on while it is written). Zero means the
	// default, 64; negative makes every checkpoint a full one.
	CheckpointDeltasMax int
	// CheckpointPartBytes bounds one part of a checkpoint: the progress a
	// crash cannot take away (see ckptfile.go). Default 32 MiB.
	CheckpointPartBytes int
	// ColdValue says which values leave RAM for the value log (vlog.go) at
	// the checkpoint that first writes them: values read rarely and never
	// changed in place (the receipt layer's terminal receipts and
	// tombstones: receipt.ColdValue). nil keeps every value in RAM; values
	// already in the value log stay readable either way.
	ColdValue func(key, value []byte) bool
	// ValueLogSegmentBytes bounds one value-log segment: the unit the
	// collector reclaims. Default 64 MiB, at most 4 GiB.
	ValueLogSegmentBytes int64
	// ValueLogGCLiveRatio is the live fraction below which the collector
	// rewrites a segment's live records and removes it. Default 0.5:
	// rewriting then costs at most as many bytes as it frees.
	ValueLogGCLiveRatio float64
	// CollectorOffAtOpen turns the process's garbage collector off while
	// Open recovers, and puts the GC percent back after (opengc.go): an
	// open keeps nearly all it allocates, so collecting during it frees
	// next to nothing, and at 1 M receipts cost 0.15 s of CPU and a fifth
	// of the open's page faults (docs/engine.md, "Replay speed"). It is a
	// process-wide setting, so it is the process owner's call: idemd sets
	// it; a host that opens stores while it serves other work should not.
	CollectorOffAtOpen bool
	// MapCheckpoints maps the checkpoint files an open loads instead of
	// reading them (vfs.MapFile, where the file system can): the items
	// the tree builds alias the page cache's pages instead of a copy in
	// fresh memory, which on a VM whose host reclaims the guest's free
	// pages was a third of an open's CPU (docs/engine.md, "What an open's
	// time is made of"); in a crash loop, whose opens follow a kill by
	// seconds, a GB of chain loaded in 0.69–0.74 s mapped against 1.04 s
	// read. idemd turns it on (-map-checkpoints); the library leaves it
	// off, because a mapping is never unmapped — the values the store
	// hands out stay valid as long as their holder keeps them — so
	// the files an open mapped keep their disk space, once a merge deletes
	// them, until the process exits, and every Open maps anew: a host that
	// opens stores again and again should leave it off.
	MapCheckpoints bool
	// WAL passes options through to the log (OnDurable is the engine's own).
	WAL wal.Options
	// Logger receives checkpoint, repair and fail-stop reports.
	Logger *slog.Logger
	// FS is the file system the data directory lives on (the WAL's too):
	// nil means vfs.Default. Tests put vfs/memfs or vfs/errorfs here.
	FS vfs.FS
}

const (
	defaultCheckpointLogBytes  = 64 << 20
	defaultCheckpointPartBytes = 32 << 20
	defaultCheckpointDeltasMax = 64
	defaultVlogSegmentBytes    = 64 << 20
	defaultVlogGCLiveRatio     = 0.5
)

func (o Options) withDefaults() Options {
	if o.CheckpointLogBytes == 0 {
		o.CheckpointLogBytes = defaultCheckpointLogBytes
	}
	if o.CheckpointDeltasMax == 0 {
		o.CheckpointDeltasMax = defaultCheckpointDeltasMax
	}
	if o.CheckpointPartBytes <= 0 {
		o.CheckpointPartBytes = defaultCheckpointPartBytes
	}
	if o.ValueLogSegmentBytes <= 0 {
		o.ValueLogSegmentBytes = defaultVlogSegmentBytes
	}
	o.ValueLogSegmentBytes = min(o.ValueLogSegmentBytes, vlogSegmentMaxCap)
	if o.ValueLogGCLiveRatio <= 0 || o.ValueLogGCLiveRatio >= 1 {
		o.ValueLogGCLiveRatio = defaultVlogGCLiveRatio
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	o.WAL.FS = o.FS
	if o.WAL.Logger == nil {
		o.WAL.Logger = o.Logger
	}
	// One batch (store.BatchBytesMax, the most any store accepts) always
	// fits one group write, which is what torn-tail repair assumes.
	if o.WAL.GroupBytesMax != 0 && o.WAL.GroupBytesMax < 2*store.BatchBytesMax {
		o.WAL.GroupBytesMax = 2 * store.BatchBytesMax
	}
	return o
}
