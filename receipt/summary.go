package receipt

import (
	"context"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/store"
)

// Summary counts the receipts in the store by state, for a start-up report.
type Summary struct {
	Pending  int // published, not started
	Started  int // started, not yet terminal
	Terminal int // terminal (kept for replay until their retention ends)
	// Debt counts the terminal receipts whose intents are not all resolved
	// yet (VisibilityDebt): maintenance still has work on them.
	Debt int
	// Unreadable counts records that do not decode. Summary reports them
	// rather than failing: it is a report, and Lookup names the bad one.
	Unreadable int
	// SessionsOpen counts the interactive sessions still open in the
	// store: a new incarnation presumes its predecessor's aborted, another
	// node those of a dead one once their leases lapse.
	SessionsOpen int
	// Partial says summaryReceiptsMax (2^27) was reached: every count is then a
	// lower bound.
	Partial bool
}

// Bounds of Summary's one scan. It walks every receipt once — at start,
// after an open that has just loaded every one of them into memory, so it
// costs a fraction of that open (on the local engine it reads none of the
// value log: summaryPage) — and stops at summaryReceiptsMax rather than
// delay a start indefinitely.
const (
	summaryReceiptsMax = 1 << 27 // a day at 1 k/s is 86 M
	summaryPageMax     = 4096
)

// recordState is the part of a Record that Summary needs; decoding only it
// skips the request and envelope bytes.
type recordState struct {
	State State `cbor:"7,keyasint"`
	Debt  Debt  `cbor:"13,keyasint,omitempty"`
}

// Summary scans the receipts and counts them by state. It only reads.
func (s *Service) Summary(ctx context.Context) (Summary, error) {
	var sum Summary
	start, end := []byte(store.NSReceipt), store.PrefixEnd([]byte(store.NSReceipt))
	for seen := 0; ; {
		if seen >= summaryReceiptsMax {
			sum.Partial = true
			return sum, nil
		}
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		limit := min(summaryPageMax, s.core.store.Limits().ScanItemsMax, summaryReceiptsMax-seen)
		items, damaged, cold, last, err := s.core.summaryPage(ctx, start, end, limit)
		if err != nil {
			return sum, err
		}
		for _, it := range items {
			sum.count(it.Value)
		}
		sum.Unreadable += len(damaged)
		sum.Terminal += cold
		seen += len(items) + len(damaged) + cold
		if last == nil {
			return sum, s.core.countOpenSessions(ctx, &sum)
		}
		start = append(append([]byte(nil), last...), 0)
	}
}

// summaryPage reads one page of receipts for Summary. On a store with a
// value log, the receipts there are counted without a read: ColdValue
// puts only terminal receipts without debt there, and a summary of 20 M
// retained receipts must not cost 20 M preads at start. Elsewhere a
// receipt whose value does not read (damaged on disk) is answered in
// damaged — Unreadable, as one that does not decode: one bad record must
// not keep a server from starting.
func (c *core) summaryPage(ctx context.Context, start, end []byte, limit int) (items []store.Item, damaged [][]byte, cold int, last []byte, err error) {
	if hs := c.store.Capabilities().HotScan; hs != nil {
		items, cold, last, err = hs.ScanHot(ctx, start, end, limit)
		return items, nil, cold, last, err
	}
	items, damaged, last, err = scanAround(ctx, c.store, start, end, limit)
	return items, damaged, 0, last, err
}

// countOpenSessions counts the open entries of sessions, within
// summaryReceiptsMax.
func (c *core) countOpenSessions(ctx context.Context, sum *Summary) error {
	open := store.NSSession.Prefix("open")
	start, end := open, store.PrefixEnd(open)
	for sum.SessionsOpen < summaryReceiptsMax {
		limit := min(summaryPageMax, c.store.Limits().ScanItemsMax)
		items, err := c.store.Scan(ctx, start, end, limit)
		if err != nil {
			return err
		}
		sum.SessionsOpen += len(items)
		if len(items) < limit {
			return nil
		}
		start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
	sum.Partial = true
	return nil
}

func (sum *Summary) count(val []byte) {
	var r recordState
	if err := cbor.Unmarshal(val, &r); err != nil {
		sum.Unreadable++
		return
	}
	switch r.State {
	case Pending:
		sum.Pending++
	case Started:
		sum.Started++
	case Terminal:
		sum.Terminal++
		if r.Debt&VisibilityDebt != 0 {
			sum.Debt++
		}
	default:
		sum.Unreadable++
	}
}
