package engine

import (
	"context"
	"slices"
)

// Store is the contract every layer above the engine programs against.
//
// Ownership: Items returned by Get and Scan may share memory with the store
// and must not be modified; they stay valid as long as the caller keeps
// them (the store never changes bytes it handed out). A value the local
// engine read from its value log is a fresh copy, the caller's alone; one
// from RAM is shared. Apply copies what it needs from the batch before it
// returns; the caller may reuse the batch afterwards.
//
// A value that cannot be read back whole (a damaged value-log record) is
// an error wrapping ErrCorruption, never other bytes and never ErrNotFound.
type Store interface {
	// Get returns the current value of key: the value of the last Apply
	// that returned nil (reads never see a batch that has not), or
	// ErrNotFound. Other errors: ErrClosed; a remote store may also return
	// ctx.Err(), or ErrUnavailable when it could not be reached within its
	// own bound; nothing is known after either.
	Get(ctx context.Context, key []byte) (Item, error)
	// Scan returns up to limit items with start ≤ key < end in key order. A
	// nil end means no upper bound. limit must be in 1..Limits().ScanItemsMax,
	// else the error is ErrInvalidScan. One Scan is a point-in-time view: it
	// sees every op of a batch or none of them. Successive Scans (pages)
	// are not one view: a batch may land between them. Other errors as Get.
	Scan(ctx context.Context, start, end []byte, limit int) ([]Item, error)
	// Apply checks the batch's conditions and, if all hold, writes its puts
	// and deletes atomically and durably, returning the batch's version.
	//
	//   nil                  every op is durable and visible to reads
	//   *ConditionError      (errors.Is ErrConditionFailed) nothing was written
	//   ErrAmbiguous         the outcome is unknown: treat it as pending
	//   ErrFailStopped       nothing was written; the store refuses writes
	//                        until it is reopened (engine.DB) or until an
	//                        operator clears the cause (etcd's NOSPACE)
	//   ErrClosed, ErrInvalidBatch, ctx.Err() before submission: nothing written
	Apply(ctx context.Context, b *Batch) (Version, error)
	// Limits says what one call accepts. Every layer above sizes its
	// batches and scans from it, never from a constant of its own: a
	// replicated store accepts far less per call (etcd: 128 ops per Txn,
	// 1.5 MiB per request) than the local one.
	Limits() Limits
}

// Limits are what one call of a Store accepts. A batch beyond them is
// ErrInvalidBatch and a scan beyond them ErrInvalidScan, nothing done.
type Limits struct {
	ApplyOpsMax   int // writes (puts and deletes) per Apply
	ApplyCondsMax int // conditions per Apply
	ApplyBytesMax int // keys and values written by one Apply
	ScanItemsMax  int // items per Scan
}

// Fit is how many items of a batch fit one Apply under l: each item adds
// ops writes and conds conditions, and the batch has fixedOps and
// fixedConds of its own (a fence, say). It is at least 1, so that a caller
// always makes progress; an item that alone breaks the limits is refused
// by the store.
func (l Limits) Fit(ops, conds, fixedOps, fixedConds int) int {
	n := l.ApplyOpsMax // any bound above every real batch
	if ops > 0 {
		n = min(n, (l.ApplyOpsMax-fixedOps)/ops)
	}
	if conds > 0 {
		n = min(n, (l.ApplyCondsMax-fixedConds)/conds)
	}
	return max(n, 1)
}

// Version is the log index of the batch that last wrote a key (on etcd,
// its revision). Versions are strictly increasing across batches; 0 means
// "never written". (On etcd, concurrent batches sent in one grouped Txn
// share its revision: a batch after another, in real time, still gets a
// higher one, and each key's version is its last writer's.) A batch that changes nothing — it only deletes absent
// keys — may answer the version of the last batch that did: etcd gives
// such a Txn no revision of its own.
type Version uint64

// Item is one key with its value and version.
type Item struct {
	Key     []byte
	Value   []byte
	Version Version
}

// CondKind is what a Condition requires of its key.
type CondKind uint8

const (
	// MustBeAbsent requires that the key does not exist.
	MustBeAbsent CondKind = iota + 1
	// MustBePresent requires that the key exists, at any version.
	MustBePresent
	// MustBeAtVersion requires that the key exists at exactly Version.
	MustBeAtVersion
)

func (k CondKind) String() string {
	switch k {
	case MustBeAbsent:
		return "absent"
	case MustBePresent:
		return "present"
	case MustBeAtVersion:
		return "at-version"
	}
	return "invalid"
}

// Condition is one precondition of a batch.
type Condition struct {
	Key     []byte
	Kind    CondKind
	Version Version // for MustBeAtVersion
}

// HoldsAt reports whether c holds for its key found at version found (0:
// absent). Every store decides its conditions by it, so that a condition
// means one thing on all of them (storetest's model keeps a copy of its
// own, so that it does not share a mistake with what it checks).
func (c Condition) HoldsAt(found Version) bool {
	switch c.Kind {
	case MustBeAbsent:
		return found == 0
	case MustBePresent:
		return found != 0
	case MustBeAtVersion:
		return found != 0 && found == c.Version
	}
	return false
}

// Op is one write: a put, or a delete when Delete is set.
type Op struct {
	Key    []byte
	Value  []byte
	Delete bool
}

// Batch is a set of conditions and writes applied atomically. Ops apply in
// order, so a later op on the same key wins.
type Batch struct {
	Conds []Condition
	Ops   []Op
}

// Absent adds the condition that key does not exist.
func (b *Batch) Absent(key []byte) *Batch {
	b.Conds = append(b.Conds, Condition{Key: key, Kind: MustBeAbsent})
	return b
}

// Present adds the condition that key exists.
func (b *Batch) Present(key []byte) *Batch {
	b.Conds = append(b.Conds, Condition{Key: key, Kind: MustBePresent})
	return b
}

// AtVersion adds the condition that key exists at version v; v == 0 means
// the key must be absent.
func (b *Batch) AtVersion(key []byte, v Version) *Batch {
	if v == 0 {
		return b.Absent(key)
	}
	b.Conds = append(b.Conds, Condition{Key: key, Kind: MustBeAtVersion, Version: v})
	return b
}

// Put adds a write of value to key.
func (b *Batch) Put(key, value []byte) *Batch {
	b.Ops = append(b.Ops, Op{Key: key, Value: value})
	return b
}

// Delete adds a deletion of key.
func (b *Batch) Delete(key []byte) *Batch {
	b.Ops = append(b.Ops, Op{Key: key, Delete: true})
	return b
}

// Merge appends o's conditions and ops to b.
func (b *Batch) Merge(o *Batch) *Batch {
	if o != nil {
		b.Conds = append(b.Conds, o.Conds...)
		b.Ops = append(b.Ops, o.Ops...)
	}
	return b
}

// Grow makes room for conds more conditions and ops more ops, so that a
// batch assembled from parts (Merge) is allocated once.
func (b *Batch) Grow(conds, ops int) *Batch {
	b.Conds = slices.Grow(b.Conds, conds)
	b.Ops = slices.Grow(b.Ops, ops)
	return b
}

// Reset empties the batch, keeping its capacity.
func (b *Batch) Reset() {
	b.Conds = b.Conds[:0]
	b.Ops = b.Ops[:0]
}

// Empty reports whether the batch has no ops.
func (b *Batch) Empty() bool { return len(b.Ops) == 0 }
