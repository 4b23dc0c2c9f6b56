// Package engine is Idem's durable key-value store: atomic conditional
// batches made durable through the WAL's group commit, every key versioned by
// the log index of the batch that last wrote it, all values held in an
// in-memory B-tree, checkpoints that let the log be truncated.
//
// Everything above this package is written against Store, so that a
// cluster-shared implementation (etcd, docs/design.md §14) can replace DB.
package engine
