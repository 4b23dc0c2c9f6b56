package receipt

import (
	"context"
	"errors"
	"strings"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/twopc"
)

// MaintainStats counts what one maintenance pass did.
type MaintainStats struct {
	Scanned    int // recovery entries read
	Adopted    int // receipts taken over from another owner or incarnation
	Terminal   int // receipts made terminal
	DebtPaid   int // visibility debts resolved
	Deferred   int // held by another live owner, or could not progress
	Strays     int // recovery entries of immutable or missing receipts removed
	Released   int // retained decisions released
	LocalBusy  int // receipts a local goroutine was already working on
	ErrorsSeen int
}

// MaintainOnce is one recovery pass: it walks every recovery entry (all
// owners), executes pending receipts it holds or may adopt from the stored
// canonical request, reconciles started ones through the retained 2PC
// record, resolves visibility debt, releases retained decisions of terminal
// debt-free receipts, and finishes table purges. It uses execution capacity
// only to execute pending receipts.
func (s *Service) MaintainOnce(ctx context.Context) (MaintainStats, error) {
	var ms MaintainStats
	if err := fault.Inject(fault.ReceiptMaintainBefore); err != nil {
		return ms, err // armed with `pause`, this blocks the pass: the supervisor must not care
	}
	s.stats.passes.Add(1)
	start, end := []byte(engine.NSRecovery), engine.PrefixEnd([]byte(engine.NSRecovery))
	for ms.Scanned < MaintainReceiptsMax {
		items, err := s.store.Scan(ctx, start, end, MaintainPageMax)
		if err != nil {
			return ms, err
		}
		for _, it := range items {
			ms.Scanned++
			s.maintainEntry(ctx, it, &ms)
		}
		if len(items) < MaintainPageMax {
			break
		}
		start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
	n, err := s.releaseDecisions(ctx)
	ms.Released += n
	if err != nil {
		return ms, err
	}
	return ms, s.tables.Purge(ctx)
}

func (s *Service) maintainEntry(ctx context.Context, it engine.Item, ms *MaintainStats) {
	rest := string(engine.NSRecovery.Suffix(it.Key))
	slash := strings.LastIndexByte(rest, '/')
	if slash < 0 {
		return
	}
	id := rest[slash+1:]
	f, mine := s.beginFlight(id)
	if !mine {
		ms.LocalBusy++
		return
	}
	defer s.endFlight(id, f)
	rec, ver, err := s.load(ctx, id)
	if errors.Is(err, engine.ErrNotFound) || (err == nil && rec.State == Terminal && rec.Debt == 0) {
		// A leftover: the receipt is gone or immutable.
		if _, err := s.store.Apply(ctx, new(engine.Batch).AtVersion(it.Key, it.Version).Delete(it.Key)); err == nil {
			ms.Strays++
		}
		return
	}
	if err != nil {
		ms.ErrorsSeen++
		return
	}
	before := s.stats.adopted.Load()
	held, err := s.hold(ctx, id, rec, ver)
	if s.stats.adopted.Load() != before {
		ms.Adopted++
	}
	if err != nil {
		ms.Deferred++
		return
	}
	switch rec.State {
	case Terminal:
		if err := s.payDebt(ctx, id, rec, ver, held); err != nil {
			ms.Deferred++
			return
		}
		ms.DebtPaid++
		return
	case Pending:
		// Execution capacity is the one thing maintenance needs for a
		// pending receipt; without a free slot it moves on (the next pass,
		// or a retry, runs it) rather than stall the rest of the pass.
		select {
		case s.exec <- struct{}{}:
		default:
			ms.Deferred++
			return
		}
		ans, err := s.executePending(ctx, id, rec, ver, held)
		s.release()
		s.countMaintained(ans, err, ms)
	default:
		ans, err := s.reconcile(ctx, id, rec, ver, held)
		s.countMaintained(ans, err, ms)
	}
}

func (s *Service) countMaintained(ans Answer, err error, ms *MaintainStats) {
	if err == nil && ans.Terminal {
		ms.Terminal++
		s.stats.recovered.Add(1)
		return
	}
	ms.Deferred++
}

// releaseDecisions releases retained decisions whose receipts are terminal
// and debt-free, in batches of ReleaseBatchMax: first those queued by this
// process, then — so that nothing is forgotten across restarts — a bounded
// scan of txn/v1/dec. Each release is conditioned on the receipt being the
// very version judged releasable (or still absent): the same key may have
// started a new transaction meanwhile, whose decision must stay.
func (s *Service) releaseDecisions(ctx context.Context) (int, error) {
	s.releaseMu.Lock()
	n := min(len(s.releaseQ), ReleaseBatchMax)
	ids := append([]string(nil), s.releaseQ[:n]...)
	s.releaseQ = s.releaseQ[n:]
	s.releaseMu.Unlock()
	if len(ids) < ReleaseBatchMax {
		more, err := s.scanDecisions(ctx)
		if err != nil {
			return 0, err
		}
		ids = append(ids, more...)
	}
	var cands []releasable
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] || len(cands) >= ReleaseBatchMax {
			continue
		}
		seen[id] = true
		rec, ver, err := s.load(ctx, id)
		switch {
		case errors.Is(err, engine.ErrNotFound):
			cands = append(cands, releasable{id: id})
		case err == nil && rec.State == Terminal && rec.Debt == 0:
			cands = append(cands, releasable{id: id, receipt: ver})
		}
	}
	return s.releaseBatch(ctx, cands)
}

// releasable is a decision to release and the receipt version that allows it
// (0: the receipt is gone).
type releasable struct {
	id      string
	receipt engine.Version
}

// scanDecisions continues a cursor over retained decisions.
func (s *Service) scanDecisions(ctx context.Context) ([]string, error) {
	prefix := engine.NSTxn.Prefix("dec")
	// Passes may overlap (the maintenance loop and a direct caller); the
	// cursor is shared state.
	s.releaseMu.Lock()
	start := s.decCursor
	s.releaseMu.Unlock()
	if start == nil {
		start = prefix
	}
	items, err := s.store.Scan(ctx, start, engine.PrefixEnd(prefix), MaintainPageMax)
	if err != nil {
		return nil, err
	}
	var next []byte // nil: wrap around next time
	if len(items) == MaintainPageMax {
		next = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
	s.releaseMu.Lock()
	s.decCursor = next
	s.releaseMu.Unlock()
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, string(it.Key[len(prefix):]))
	}
	return out, nil
}

// releaseBatch releases decisions with one Apply, dropping any whose
// receipt changed or whose transaction still has unresolved participants.
func (s *Service) releaseBatch(ctx context.Context, cands []releasable) (int, error) {
	for len(cands) > 0 {
		b := new(engine.Batch)
		for _, c := range cands {
			b.AtVersion(receiptKey(c.id), c.receipt)
			twopc.ReleaseInto(b, c.id)
		}
		if err := fault.Inject(fault.ReceiptReleaseBefore); err != nil {
			return 0, err
		}
		_, err := s.store.Apply(ctx, b)
		if err == nil {
			s.stats.released.Add(uint64(len(cands)))
			return len(cands), nil
		}
		key, ok := engine.FailedKey(err)
		if !ok {
			return 0, err
		}
		kept := cands[:0]
		for _, c := range cands {
			if !strings.HasSuffix(string(key), "/"+c.id) {
				kept = append(kept, c)
			}
		}
		if len(kept) == len(cands) {
			return 0, err
		}
		cands = kept
	}
	return 0, nil
}
