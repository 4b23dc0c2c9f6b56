package receipt

import (
	"bytes"
	"context"
	"strconv"
	"time"

	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
)

// Operators list receipts by state and age without a scan of every
// receipt: mutable ones (pending, started, and terminal ones still paying
// visibility debt) through the recovery index, recov/v1/<owner>/<txn_id>;
// terminal ones through the retention index, exp/v1/<deadline>/<txn_id>,
// in deadline order — that is, in the order they completed (a chunk of
// folded entries, expfold.go, at its latest deadline). A call reads
// at most ListScanMax index entries and answers at most its limit, with a
// cursor to go on from (the last entry read), so a listing of a large
// store is many bounded calls, never one unbounded one.

// Bounds of a listing.
const (
	// ListLimitMax bounds the receipts one call answers.
	ListLimitMax = 1000
	// listLimitDefault is the limit of a call that names none.
	listLimitDefault = 100
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
	// Limit bounds the answer (0: listLimitDefault, 100; capped at ListLimitMax).
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

// List answers one page of receipts selected by f. Terminal receipts are
// walked through the chunks of folded entries first (expfold.go: the
// older receipts), then the plain entries.
func (s *Service) List(ctx context.Context, f ListFilter) (ListPage, error) {
	ns := store.NSRecovery
	ranges := [][2][]byte{{[]byte(ns), store.PrefixEnd([]byte(ns))}}
	if f.Terminal {
		ns = store.NSExpiry
		chunks := rcptChunksStart()
		ranges = [][2][]byte{{chunks, store.PrefixEnd(chunks)}, {[]byte(ns), chunks}}
	}
	var resumeIn []byte // a chunk the cursor points into
	resumeAt := 0       // and the first of its entries not yet listed
	if f.After != nil {
		if !ns.Has(f.After) {
			return ListPage{}, ErrBadCursor
		}
		for len(ranges) > 1 && (bytes.Compare(f.After, ranges[0][0]) < 0 || bytes.Compare(f.After, ranges[0][1]) >= 0) {
			ranges = ranges[1:]
		}
		ranges[0][0] = append(bytes.Clone(f.After), 0)
		if chunk, i, ok := parseChunkCursor(f.After); ok && f.Terminal {
			ranges[0][0], resumeIn, resumeAt = chunk, chunk, i+1
		}
	}
	limit := f.Limit
	if limit <= 0 {
		limit = listLimitDefault
	}
	limit = min(limit, ListLimitMax)
	w := listWalk{s: s, f: f, ns: ns, now: s.core.clock.Now(), limit: limit, resumeIn: resumeIn, resumeAt: resumeAt}
	for i, r := range ranges {
		done, err := w.walk(ctx, r[0], r[1])
		if err != nil {
			return ListPage{}, err
		}
		if !done {
			return w.page, nil
		}
		if i == len(ranges)-1 {
			w.page.Next = nil
		}
	}
	return w.page, nil
}

// listWalk is one List call's walk of its index ranges.
type listWalk struct {
	s        *Service
	f        ListFilter
	ns       store.Namespace
	now      time.Time
	limit    int
	resumeIn []byte
	resumeAt int
	scanned  int
	page     ListPage
}

// walk lists from [start, end) until the page is full or ListScanMax
// entries are read (done false: page.Next goes on), or the range ends.
func (w *listWalk) walk(ctx context.Context, start, end []byte) (done bool, err error) {
	for w.scanned < ListScanMax {
		n := min(ListScanMax-w.scanned, w.s.core.store.Limits().ScanItemsMax, maintainPageMax)
		// An entry whose value does not read (a damaged chunk) is passed
		// over: the listing is of what reads; idemctl check names the rest.
		items, damaged, last, err := scanAround(ctx, w.s.core.store, start, end, n)
		if err != nil {
			return false, err
		}
		w.scanned += len(damaged)
		for _, it := range items {
			if chunk, ok := rcptChunkOf(it); ok && w.f.Terminal {
				if full := w.chunk(ctx, chunk); full {
					return false, nil
				}
				continue
			}
			w.scanned++
			w.page.Next = bytes.Clone(it.Key)
			if l, ok := w.s.core.listed(ctx, w.f, w.ns, it.Key, w.now); ok && w.add(l) {
				return false, nil
			}
		}
		if last == nil {
			return true, nil
		}
		w.page.Next = bytes.Clone(last)
		start = append(bytes.Clone(last), 0)
	}
	return false, nil
}

// chunk lists a chunk's receipts, from where the cursor left off; full
// says the call is done inside it.
func (w *listWalk) chunk(ctx context.Context, c rcptChunk) (full bool) {
	from := 0
	if bytes.Equal(c.key, w.resumeIn) {
		from = w.resumeAt
	}
	for i := from; i < len(c.entries); i++ {
		if w.scanned >= ListScanMax {
			return true
		}
		w.scanned++
		w.page.Next = chunkCursor(c.key, i)
		if l, ok := w.s.core.listedID(ctx, w.f, c.entries[i].id, c.entries[i].deadline, w.now); ok && w.add(l) {
			return true
		}
	}
	w.page.Next = bytes.Clone(c.key)
	return false
}

// add appends l and says whether the page is full.
func (w *listWalk) add(l Listed) bool {
	w.page.Receipts = append(w.page.Receipts, l)
	return len(w.page.Receipts) == w.limit
}

// A cursor into a receipt chunk (expfold.go) is the chunk's key, "/" and
// the index of the last entry listed.
func chunkCursor(chunk []byte, i int) []byte {
	return strconv.AppendInt(append(bytes.Clone(chunk), '/'), int64(i), 10)
}

func parseChunkCursor(c []byte) (chunk []byte, i int, ok bool) {
	at := len(rcptChunksStart()) + 20 + 1 + 2*txnIDBytes
	if !isRcptChunkKey(c) || len(c) <= at+1 || c[at] != '/' {
		return nil, 0, false
	}
	n, err := strconv.Atoi(string(c[at+1:]))
	if err != nil || n < 0 {
		return nil, 0, false
	}
	return c[:at], n, true
}

// listed reads the receipt an index entry names and says whether f keeps it.
func (c *core) listed(ctx context.Context, f ListFilter, ns store.Namespace, key []byte, now time.Time) (Listed, bool) {
	id, ok := indexedID(ns, key)
	if !ok {
		return Listed{}, false
	}
	return c.listedID(ctx, f, id, 0, now)
}

// listedID is listed for receipt id; a chunk's entry names its deadline,
// and lists the receipt only while the receipt's is that one (else it has
// moved on to an entry of its own).
func (c *core) listedID(ctx context.Context, f ListFilter, id string, deadline int64, now time.Time) (Listed, bool) {
	rec, _, err := c.load(ctx, id)
	if err != nil || (f.Principal != "" && rec.Principal != f.Principal) || (f.State != 0 && rec.State != f.State) {
		return Listed{}, false
	}
	if deadline != 0 && rec.RetainUntil != deadline {
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
func indexedID(ns store.Namespace, key []byte) (string, bool) {
	if ns == store.NSExpiry {
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
