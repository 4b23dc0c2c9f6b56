// Package engine is Idem's local durable store, engine.DB: atomic
// conditional batches made durable through the WAL's group commit, every
// key versioned by the log index of the batch that last wrote it, all
// values held in an in-memory B-tree, and checkpoints that let the log be
// truncated. The offline checker of a stopped dir is package engine/check,
// above this one: it judges the files by the engine's own rules and
// decoders, which inspect.go (file names, checkpoint files, log entries),
// inspectchain.go (checkpoint chains as recovery links them) and
// inspectdb.go (the keys an open built) export to it read-only.
//
// DB is a facade: it keeps the Store methods and what hosts call (Open,
// Close, Apply, ApplyChain, Get, GetLatest, Scan, ScanHot, Snapshot,
// Checkpoint, Backup, Restored, Stats, Health; VerifyKeys for the
// checker) and the state they share, and hands the rest to components
// that own their own state and methods:
// the checkpointer (checkpoint.go: automatic checkpoints, the writing of
// bases and deltas), the merger (merge.go: merges into a new base, in the
// background), the collector (vlog_gc.go: the value log's collection and
// the retirement of its segments; vlog_adopt.go: the records interrupted
// checkpoints spilled, adopted by the next life) and the recoverer (recover.go: one
// Open's recovery; replay.go: the log replayed after the chain, read and
// applied on two goroutines, replaypipe.go, in batches sorted by a radix
// sort, replaysort.go, over the chain's sorted records,
// replayoverlay.go; opengc.go: the collector paused meanwhile; openphases.go:
// how long each of its steps took). The chain they all work on (chain, fallback,
// ckptPending) stays on DB under ckptMu.
//
// DB implements the contract of package store, which everything above is
// written against, so that a cluster-shared implementation (store/etcd,
// docs/design.md §14) can replace it.
package engine
