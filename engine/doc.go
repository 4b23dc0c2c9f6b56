// Package engine is Idem's local durable store, engine.DB: atomic
// conditional batches made durable through the WAL's group commit, every
// key versioned by the log index of the batch that last wrote it, all
// values held in an in-memory B-tree, checkpoints that let the log be
// truncated, and the offline checker (check*.go).
//
// DB implements the contract of package store, which everything above is
// written against, so that a cluster-shared implementation (store/etcd,
// docs/design.md §14) can replace it.
package engine
