// Package store is the contract every layer above the storage programs
// against (docs/design.md §14): Store, its batches and conditions, its
// limits and the one check of them, its errors, the optional capabilities
// a store declares, and the registry of key namespaces. Like raft's
// Storage it stands alone: it links no store, so that a store (the local
// engine, store/etcd, store/memstore) and the layers above meet here and
// nowhere else.
//
// File map:
//
//	store.go         the Store interface, Version, Item
//	batch.go         Batch, Condition, Op: what one Apply asks
//	limits.go        Limits, the ceilings every store stays within, Fit
//	check.go         Check and CheckScan: the refusals every store makes alike
//	errors.go        the sentinels, grouped by when they happen; ConditionError, ValueError, CorruptionError
//	format.go        Format: a stored format, as each store and layer lists its own
//	capabilities.go  Capabilities: Chainer, MultiGetter, HotScanner, LatestReader, SpaceReporter
//	namespace.go     the registry of key namespaces, PrefixEnd
//
// Beside it: store/memstore (the reference implementation), store/storetest
// (the conformance suite every store passes) and store/etcd (the
// cluster-shared store). The local engine is package engine.
package store
