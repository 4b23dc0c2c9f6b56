package store

// The most any store accepts of one call: the local engine's bounds, which
// are its Limits (a batch within them fits one group write of its log,
// engine/options.go). A store may accept less (Limits), never more.
const (
	// KeyBytesMax bounds a key, on every store.
	KeyBytesMax = 4 << 10
	// BatchBytesMax bounds the keys and values written by one batch.
	BatchBytesMax = 2 << 20
	// BatchOpsMax bounds the ops (and, separately, the conditions) of a
	// batch.
	BatchOpsMax = 16 << 10
	// ScanLimitMax bounds the items one Scan returns.
	ScanLimitMax = 16 << 10
)

// Limits are what one call of a Store accepts. A batch beyond them is
// ErrInvalidBatch and a scan beyond them ErrInvalidScan, nothing done
// (check.go).
type Limits struct {
	ApplyOpsMax   int // writes (puts and deletes) per Apply
	ApplyCondsMax int // conditions per Apply
	ApplyBytesMax int // keys and values written by one Apply
	ScanItemsMax  int // items per Scan
}

// MaxLimits are the most any store accepts: the local engine's limits.
var MaxLimits = Limits{ApplyOpsMax: BatchOpsMax, ApplyCondsMax: BatchOpsMax, ApplyBytesMax: BatchBytesMax, ScanItemsMax: ScanLimitMax}

// Within is l with each bound at most MaxLimits'.
func (l Limits) Within() Limits {
	return Limits{
		ApplyOpsMax:   min(l.ApplyOpsMax, BatchOpsMax),
		ApplyCondsMax: min(l.ApplyCondsMax, BatchOpsMax),
		ApplyBytesMax: min(l.ApplyBytesMax, BatchBytesMax),
		ScanItemsMax:  min(l.ScanItemsMax, ScanLimitMax),
	}
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
