package receipt

import (
	"context"
	"errors"
	"strings"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/twopc"
)

// A receipt's retained 2PC decision (docs/design.md §4: kept while any receipt
// references it) is released once the receipt is terminal and debt-free,
// off the response path: maintenance releases, in batches, the decisions
// this process queued when their receipts settled, and scans txn/v1/dec
// for any it forgot (across restarts, or beyond releaseQueueMax).

// queueRelease remembers a decision to release once its receipt is terminal
// and debt-free; beyond releaseQueueMax the maintenance scan finds it.
func (rt *retention) queueRelease(id string) {
	rt.releaseMu.Lock()
	if len(rt.releaseQ) < releaseQueueMax {
		rt.releaseQ = append(rt.releaseQ, id)
	}
	rt.releaseMu.Unlock()
}

// releaseDecisions releases retained decisions whose receipts are terminal
// and debt-free, in batches of ReleaseBatchMax: first those queued by this
// process, then — so that nothing is forgotten across restarts — a bounded
// scan of txn/v1/dec. Each release is conditioned on the receipt being the
// very version judged releasable (or still absent): the same key may have
// started a new transaction meanwhile, whose decision must stay.
func (rt *retention) releaseDecisions(ctx context.Context) (int, error) {
	rt.releaseMu.Lock()
	batchMax := rt.releaseBatchMax()
	n := min(len(rt.releaseQ), batchMax)
	ids := append([]string(nil), rt.releaseQ[:n]...)
	rt.releaseQ = rt.releaseQ[n:]
	rt.releaseMu.Unlock()
	if len(ids) < batchMax {
		more, err := rt.scanDecisions(ctx)
		if err != nil {
			return 0, err
		}
		ids = append(ids, more...)
	}
	return rt.releaseBatch(ctx, rt.releasables(ctx, ids, batchMax))
}

// releasables reads the receipts of ids, store.GetManyMax at a time (one
// round trip each on etcd, where one read per receipt would cost every
// keyed request a background round trip), and returns, up to max, those
// whose decision may go: the receipt is gone, or terminal and debt-free.
// A receipt that does not read is left for a later pass (the scan of
// txn/v1/dec finds it again).
func (rt *retention) releasables(ctx context.Context, ids []string, max int) []releasable {
	var cands []releasable
	seen := map[string]bool{}
	keys, chunk := make([][]byte, 0, store.GetManyMax), make([]string, 0, store.GetManyMax)
	for i := 0; i < len(ids) && len(cands) < max; {
		keys, chunk = keys[:0], chunk[:0]
		for ; i < len(ids) && len(chunk) < store.GetManyMax && len(cands)+len(chunk) < max; i++ {
			if !seen[ids[i]] {
				seen[ids[i]] = true
				keys, chunk = append(keys, receiptKey(ids[i])), append(chunk, ids[i])
			}
		}
		items, err := store.GetAll(ctx, rt.core.store, keys...)
		if err != nil {
			// One value that does not read fails the whole read: the
			// chunk one by one, so that it holds back only itself.
			cands = rt.releasablesOneByOne(ctx, chunk, cands)
			continue
		}
		for j, it := range items {
			if it.Version == 0 {
				cands = append(cands, releasable{id: chunk[j]})
				continue
			}
			if rec, err := DecodeRecord(it.Value); err == nil && settled(rec) {
				cands = append(cands, releasable{id: chunk[j], receipt: it.Version})
			}
		}
	}
	return cands
}

// releasablesOneByOne is releasables for ids with one read each, added to
// cands.
func (rt *retention) releasablesOneByOne(ctx context.Context, ids []string, cands []releasable) []releasable {
	for _, id := range ids {
		rec, ver, err := rt.core.load(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			cands = append(cands, releasable{id: id})
		case err == nil && settled(rec):
			cands = append(cands, releasable{id: id, receipt: ver})
		}
	}
	return cands
}

// releasable is a decision to release and the receipt version that allows it
// (0: the receipt is gone).
type releasable struct {
	id      string
	receipt store.Version
}

// scanDecisions continues a cursor over retained decisions.
func (rt *retention) scanDecisions(ctx context.Context) ([]string, error) {
	prefix := store.NSTxn.Prefix("dec")
	// Passes may overlap (the maintenance loop and a direct caller); the
	// cursor is shared state.
	rt.releaseMu.Lock()
	start := rt.decCursor
	rt.releaseMu.Unlock()
	if start == nil {
		start = prefix
	}
	page := min(maintainPageMax, rt.core.store.Limits().ScanItemsMax)
	items, err := rt.core.store.Scan(ctx, start, store.PrefixEnd(prefix), page)
	if err != nil {
		return nil, err
	}
	var next []byte // nil: wrap around next time
	if len(items) == page {
		next = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
	rt.releaseMu.Lock()
	rt.decCursor = next
	rt.releaseMu.Unlock()
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, string(it.Key[len(prefix):]))
	}
	return out, nil
}

// releaseBatchMax is how many decisions one Apply releases: ReleaseBatchMax,
// or fewer where the store takes less per call. Each costs one delete and
// two conditions (the receipt's version, the absent coordinator record).
func (rt *retention) releaseBatchMax() int {
	return min(ReleaseBatchMax, rt.core.store.Limits().Fit(1, 2, 0, 0))
}

// releaseBatch releases decisions with one Apply, dropping any whose
// receipt changed or whose transaction still has unresolved participants.
func (rt *retention) releaseBatch(ctx context.Context, cands []releasable) (int, error) {
	for len(cands) > 0 {
		b := new(store.Batch)
		for _, c := range cands {
			b.AtVersion(receiptKey(c.id), c.receipt)
			twopc.ReleaseInto(b, c.id)
		}
		if err := fault.Inject(fault.ReceiptReleaseBefore); err != nil {
			return 0, err
		}
		_, err := rt.core.store.Apply(ctx, b)
		switch classifyWrite(err, nil) {
		case writeDone:
			rt.core.stats.released.Add(uint64(len(cands)))
			return len(cands), nil
		case writeRetry:
			// A receipt changed, or a transaction still has unresolved
			// participants: drop that candidate, release the rest.
		default:
			return 0, err
		}
		kept, ok := dropFailed(err, cands, func(key []byte, c releasable) bool { return strings.HasSuffix(string(key), "/"+c.id) })
		if !ok {
			return 0, err
		}
		cands = kept
	}
	return 0, nil
}
