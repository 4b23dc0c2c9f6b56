package store

import "slices"

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
