package index

import "github.com/idemdb/idem/internal/btree"

// Finger is where the last PutAt left its item (internal/btree's FingerG):
// the next item of an ascending run that falls in the same leaf goes in
// without a descent from the root. The zero Finger is empty.
type Finger[T any] struct{ f btree.FingerG[T] }

// PutAt is Put, from f's leaf when item belongs there. Between two PutAt
// calls with one finger, any other write to the set (Put, Delete, another
// finger's PutAt) must be followed by f.Reset: it can split, merge or free
// the leaf f holds.
func (o *Ordered[T]) PutAt(f *Finger[T], item T) (T, bool) { return o.t.ReplaceOrInsertAt(&f.f, item) }

// Reset empties f.
func (f *Finger[T]) Reset() { f.f.Reset() }
