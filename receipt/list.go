package receipt

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/lease"
)

// Operators list receipts by state and age without a scan of every
// receipt: mutable ones (pending, started, and terminal ones still paying
// visibility debt) through the recovery index, recov/v1/<owner>/<txn_id>;
// terminal ones through the retention index, exp/v1/<deadline>/<txn_id>,
// in deadline order — that is, in the order they completed. A call reads
// at most ListScanMax index entries and answers at most its limit, with a
// cursor to go on from (the last entry read), so a listing of a large
// store is many bounded calls, never one unbounded one.

// Bounds of a listing.
const (
	// ListLimitMax bounds the receipts one call answers.
	ListLimitMax = 1000
	// ListLimitDefault is the limit of a call that names none.
	ListLimitDefault = 100
	// ListScanMax bounds the index entries one call reads.
	ListScanMax = 4096
)

// ListFilter selects what List answers.
type ListFilter struct {
	// Principal restricts the listing to one principal's receipts; ""
	// lists every principal's (an operator's listing: the caller decides
	// who may).
	Principal string
	// Terminal lists terminal receipts (by completion); false lists the
	// mutable ones, and terminal ones still owing visibility debt. State,
	// if set, keeps only that state.
	Terminal bool
	State    State
	// OlderThan keeps receipts created (mutable) or completed (terminal)
	// at least that long ago.
	OlderThan time.Duration
	// After is the cursor of the previous page (nil: from the start).
	After []byte
	// Limit bounds the answer (0: ListLimitDefault; capped at ListLimitMax).
	Limit int
}

// Listed is one receipt of a listing.
type Listed struct {
	TxnID                       string
	Principal, Table, Key       string
	State                       State
	Created, Started, Completed time.Time
	Owner                       *lease.Claim // mutable receipts: the claim, as the record has it
	Debt                        Debt
	Outcome                     string // terminal only
	ResolvedBy                  string
}

// ListPage is one call's answer. Next is the cursor to continue after
// (nil: the index is walked to its end).
type ListPage struct {
	Receipts []Listed
	Next     []byte
}

// ErrBadCursor reports a cursor that is not one List gave for this index.
var ErrBadCursor = errors.New("receipt: the cursor is not one this listing gave")

// List answers one page of receipts selected by f.
func (s *Service) List(ctx context.Context, f ListFilter) (ListPage, error) {
	ns := engine.NSRecovery
	if f.Terminal {
		ns = engine.NSExpiry
	}
	start, end := []byte(ns), engine.PrefixEnd([]byte(ns))
	if f.After != nil {
		if !ns.Has(f.After) {
			return ListPage{}, ErrBadCursor
		}
		start = append(bytes.Clone(f.After), 0)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = ListLimitDefault
	}
	limit = min(limit, ListLimitMax)
	now := s.clock.Now()
	var page ListPage
	for scanned := 0; scanned < ListScanMax; {
		n := min(ListScanMax-scanned, s.store.Limits().ScanItemsMax, MaintainPageMax)
		items, err := s.store.Scan(ctx, start, end, n)
		if err != nil {
			return ListPage{}, err
		}
		for _, it := range items {
			scanned++
			page.Next = bytes.Clone(it.Key)
			if l, ok := s.listed(ctx, f, ns, it.Key, now); ok {
				page.Receipts = append(page.Receipts, l)
				if len(page.Receipts) == limit {
					return page, nil
				}
			}
		}
		if len(items) < n {
			page.Next = nil
			return page, nil
		}
		start = append(bytes.Clone(items[len(items)-1].Key), 0)
	}
	return page, nil
}

// listed reads the receipt an index entry names and says whether f keeps it.
func (s *Service) listed(ctx context.Context, f ListFilter, ns engine.Namespace, key []byte, now time.Time) (Listed, bool) {
	id, ok := indexedID(ns, key)
	if !ok {
		return Listed{}, false
	}
	rec, _, err := s.load(ctx, id)
	if err != nil || (f.Principal != "" && rec.Principal != f.Principal) || (f.State != 0 && rec.State != f.State) {
		return Listed{}, false
	}
	if f.Terminal && rec.State != Terminal {
		return Listed{}, false // every receipt has a retention entry from its creation
	}
	at := time.UnixMilli(rec.Created)
	if rec.State == Terminal && rec.Completed != 0 {
		at = time.UnixMilli(rec.Completed)
	}
	if f.OlderThan > 0 && now.Sub(at) < f.OlderThan {
		return Listed{}, false
	}
	l := Listed{TxnID: id, Principal: rec.Principal, Table: rec.Table, Key: rec.Key, State: rec.State,
		Created: time.UnixMilli(rec.Created), Owner: rec.Owner, Debt: rec.Debt, ResolvedBy: rec.ResolvedBy}
	if rec.Started != 0 {
		l.Started = time.UnixMilli(rec.Started)
	}
	if rec.State == Terminal {
		l.Outcome = EnvelopeOf(rec, id).Outcome
		if rec.Completed != 0 {
			l.Completed = time.UnixMilli(rec.Completed)
		}
	}
	return l, true
}

// indexedID is the receipt an index entry names: recov/v1/<owner>/<id>,
// or exp/v1/<deadline>/<id> but for a session's entry and a tombstone
// chunk.
func indexedID(ns engine.Namespace, key []byte) (string, bool) {
	if ns == engine.NSExpiry {
		_, id, ok := parseExpiryKey(key)
		// A receipt's ID is 32 hex digits: a session's ("s…") and a
		// tombstone chunk's ("t" and 32) are not.
		if !ok || len(id) != 2*txnIDBytes || lease.KindOf(id) != lease.KindReceipt {
			return "", false
		}
		return id, true
	}
	rest := ns.Suffix(key)
	i := bytes.LastIndexByte(rest, '/')
	if i < 0 || len(rest)-i-1 != 2*txnIDBytes {
		return "", false
	}
	return string(rest[i+1:]), true
}
