package index

import "bytes"

// KV is one key of the engine's key space. Key and Value are immutable once
// inserted; Version is the log index of the batch that last wrote the key.
type KV struct {
	Key     []byte
	Value   []byte
	Version uint64
}

func kvLess(a, b KV) bool { return bytes.Compare(a.Key, b.Key) < 0 }

// NewKeySpace returns an empty primary key space ordered by key bytes.
func NewKeySpace() *Ordered[KV] { return NewOrdered(kvLess) }

// Deadline orders items by time, then ID: the expiry index.
type Deadline struct {
	At int64 // unix nanoseconds
	ID string
}

// NewDeadlines returns an empty deadline ordering.
func NewDeadlines() *Ordered[Deadline] {
	return NewOrdered(func(a, b Deadline) bool {
		if a.At != b.At {
			return a.At < b.At
		}
		return a.ID < b.ID
	})
}

// Owned orders items by owner, then ID: the recovery-by-owner index.
type Owned struct {
	Owner string
	ID    string
}

// NewOwned returns an empty owner ordering.
func NewOwned() *Ordered[Owned] {
	return NewOrdered(func(a, b Owned) bool {
		if a.Owner != b.Owner {
			return a.Owner < b.Owner
		}
		return a.ID < b.ID
	})
}

// NewIDSet returns an empty set of string IDs (the renewal active set).
func NewIDSet() *Ordered[string] { return NewOrdered(func(a, b string) bool { return a < b }) }
