package store

import "fmt"

// Check is the one test of a batch every store makes before it looks at
// its data, so that an invalid batch writes nothing and is refused alike
// everywhere. It refuses, as ErrInvalidBatch: a batch with no ops; keys
// (of ops and of conditions) outside 1..KeyBytesMax bytes; an unknown
// condition kind; and more ops, conditions or bytes (keys and values)
// than l allows, with l within MaxLimits.
func Check(b *Batch, l Limits) error {
	if b == nil || len(b.Ops) == 0 {
		return fmt.Errorf("%w: no ops", ErrInvalidBatch)
	}
	l = l.Within()
	size := 0
	for _, op := range b.Ops {
		if len(op.Key) == 0 || len(op.Key) > KeyBytesMax {
			return fmt.Errorf("%w: key of %d bytes (1..%d)", ErrInvalidBatch, len(op.Key), KeyBytesMax)
		}
		size += len(op.Key) + len(op.Value)
	}
	for _, c := range b.Conds {
		if len(c.Key) == 0 || len(c.Key) > KeyBytesMax {
			return fmt.Errorf("%w: condition key of %d bytes (1..%d)", ErrInvalidBatch, len(c.Key), KeyBytesMax)
		}
		if c.Kind < MustBeAbsent || c.Kind > MustBeAtVersion {
			return fmt.Errorf("%w: condition kind %d", ErrInvalidBatch, c.Kind)
		}
	}
	if len(b.Ops) > l.ApplyOpsMax || len(b.Conds) > l.ApplyCondsMax || size > l.ApplyBytesMax {
		return fmt.Errorf("%w: %d ops, %d conditions, %d bytes (this store: at most %d, %d, %d)", ErrInvalidBatch,
			len(b.Ops), len(b.Conds), size, l.ApplyOpsMax, l.ApplyCondsMax, l.ApplyBytesMax)
	}
	return nil
}

// CheckScan refuses, as ErrInvalidScan, a scan limit outside
// 1..l.ScanItemsMax.
func CheckScan(limit int, l Limits) error {
	if limit <= 0 || limit > l.ScanItemsMax {
		return fmt.Errorf("%w: scan limit %d (1..%d)", ErrInvalidScan, limit, l.ScanItemsMax)
	}
	return nil
}
