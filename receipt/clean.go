package receipt

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/twopc"
)

// cleanerJob names the job lease that fences the retention cleaner.
const cleanerJob = "cleaner"

// CleanOnce is one retention pass: it walks the expiry index up to now and
// deletes terminal, debt-free receipts whose retention ended, with their
// expiry entries and retained decisions, in bounded batches. Receipts with
// debt — execution (not terminal), visibility (unresolved intents) or
// coordinator handoff (decided, not yet published: still started) — are
// pinned and skipped. Every batch is fenced by the cleaner's job lease, so a
// stale incarnation's cleaner cannot delete anything.
//
// The pass then folds settled entries into chunks (expfold.go), at most
// CleanScanMax of them.
func (s *Service) CleanOnce(ctx context.Context) (int, error) {
	s.retain.cleanMu.Lock()
	defer s.retain.cleanMu.Unlock()
	n, _, err := s.retain.cleanPass(ctx, nil)
	if err != nil {
		return n, err
	}
	_, err = s.retain.foldPass(ctx)
	return n, err
}

// foldPass is one fold pass under the cleaner's job lease.
func (rt *retention) foldPass(ctx context.Context) (int, error) {
	now := rt.core.clock.Now()
	jobVer, ok, err := lease.AcquireJob(ctx, rt.core.store, cleanerJob, rt.core.owner, now, rt.core.opts.LeaseTTL)
	if err != nil || !ok {
		return 0, err
	}
	return rt.foldFrom(ctx, jobVer, now)
}

// cleanPass is CleanOnce from the expiry entry from on (nil: the first);
// next, when not nil, is where a pass that stopped at CleanScanMax would
// go on.
func (rt *retention) cleanPass(ctx context.Context, from []byte) (n int, next []byte, err error) {
	now := rt.core.clock.Now()
	jobVer, ok, err := lease.AcquireJob(ctx, rt.core.store, cleanerJob, rt.core.owner, now, rt.core.opts.LeaseTTL)
	if err != nil || !ok {
		return 0, nil, err
	}
	return rt.cleanFrom(ctx, jobVer, now, from)
}

// cleanPassesMax bounds the passes one tick of the cleaner loop runs back
// to back while expired entries remain: at most CleanScanMax ×
// cleanPassesMax entries per CleanInterval, so that the cleaner keeps up
// with a write rate far above CleanScanMax per interval.
const cleanPassesMax = 64

// cleanTick runs passes, each going on where the last stopped, until the
// expired entries are walked, or cleanPassesMax.
// Then fold passes, until one folds nothing, or cleanPassesMax.
func (rt *retention) cleanTick(ctx context.Context) (int, error) {
	rt.cleanMu.Lock()
	defer rt.cleanMu.Unlock()
	total := 0
	var from []byte
	for range cleanPassesMax {
		n, next, err := rt.cleanPass(ctx, from)
		total += n
		if err != nil {
			return total, err
		}
		if next == nil {
			break
		}
		from = next
	}
	for range cleanPassesMax {
		if n, err := rt.foldPass(ctx); err != nil || n == 0 {
			return total, err
		}
	}
	return total, nil
}

// cleanFrom walks the due plain entries, then the due chunks of folded
// ones (expfold.go), from from on, at most CleanScanMax entries.
func (rt *retention) cleanFrom(ctx context.Context, jobVer store.Version, now time.Time, from []byte) (int, []byte, error) {
	due := now.UnixMilli() + 1
	ranges := [][2][]byte{{[]byte(store.NSExpiry), expiryKey(due, "")}, {rcptChunksStart(), rcptChunkKey(due, "")}}
	if from != nil && isRcptChunkKey(from) {
		ranges = ranges[1:]
	}
	if from != nil {
		ranges[0][0] = from
	}
	cleaned, scanned := 0, 0
	for _, r := range ranges {
		n, next, err := rt.cleanRange(ctx, jobVer, now, r[0], r[1], &scanned)
		cleaned += n
		if err != nil || next != nil {
			return cleaned, next, err
		}
	}
	return cleaned, nil, nil
}

// cleanRange is cleanFrom over one range of the expiry index, scanned
// counting against CleanScanMax.
func (rt *retention) cleanRange(ctx context.Context, jobVer store.Version, now time.Time, start, end []byte, scannedp *int) (int, []byte, error) {
	cleaned := 0
	page := rt.cleanPageMax()
	for *scannedp < CleanScanMax {
		scanned := *scannedp
		items, damaged, last, err := scanAround(ctx, rt.core.store, start, end, page)
		if err != nil {
			return cleaned, nil, err
		}
		for _, k := range damaged {
			// A chunk whose value does not read: its receipts wait for a
			// repair; the pass goes on.
			rt.core.opts.Logger.Error("receipt: an expiry entry does not read; the cleaner leaves it (see idemctl check)",
				"key", string(k))
		}
		scanned += len(damaged)
		var victims []victim
		for _, it := range items {
			scanned++
			if chunk, ok := tombChunkOf(it); ok {
				if _, err := rt.cleanTombs(ctx, jobVer, chunk, now); err != nil {
					return cleaned, nil, err
				}
				continue
			}
			if chunk, ok := rcptChunkOf(it); ok {
				scanned += len(chunk.entries)
				n, err := rt.cleanChunk(ctx, jobVer, chunk, now)
				cleaned += n
				if err != nil {
					return cleaned, nil, err
				}
				continue
			}
			if v, ok := rt.cleanable(ctx, it); ok {
				victims = append(victims, v)
			}
		}
		*scannedp = scanned
		n, err := rt.deleteVictims(ctx, jobVer, victims)
		cleaned += n
		if err != nil {
			return cleaned, nil, err
		}
		if last == nil {
			return cleaned, nil, nil
		}
		start = append(bytes.Clone(last), 0)
	}
	return cleaned, start, nil
}

// cleanPageMax is how many expiry entries one pass reads, and so at most
// deletes with one Apply: cleanBatchMax, or fewer where the store takes
// less per call. A victim costs at most four writes (entry, receipt and
// decision deleted, tombstone put) and three conditions (their versions,
// the absent coordinator record); the batch adds the job-lease fence and
// its tombstones' chunk.
func (rt *retention) cleanPageMax() int {
	lim := rt.core.store.Limits()
	return min(cleanBatchMax, lim.ScanItemsMax, lim.Fit(victimOpsMax, victimCondsMax, 1, 1))
}

// The most one victim adds to a cleanup batch (see deleteVictims).
const (
	victimOpsMax   = 4
	victimCondsMax = 3
)

// victim is one expiry entry to delete, with its receipt (or ended
// session) if it has one.
type victim struct {
	id       string
	entry    []byte
	receipt  bool
	session  bool
	rcptVer  store.Version // the receipt's, or the session record's
	entryVer store.Version
	deadline int64      // of the entry, unix ms
	tomb     *Tombstone // what the receipt leaves behind (nil: nothing)
	tombVal  []byte     // tomb, encoded
	steps    int        // a session's steps, which may outlive it (session_steps.go)
}

func (rt *retention) cleanable(ctx context.Context, it store.Item) (victim, bool) {
	deadline, id, ok := parseExpiryKey(it.Key)
	if !ok {
		return victim{}, false
	}
	v := victim{id: id, entry: it.Key, entryVer: it.Version}
	if lease.KindOf(id) == lease.KindSession {
		return rt.cleanableSession(ctx, v, deadline)
	}
	return rt.cleanableAt(ctx, v, deadline)
}

// cleanableAt is cleanable for receipt v.id, due by an index entry at
// deadline: a plain one (v.entry), or in a chunk (no entry of its own).
func (rt *retention) cleanableAt(ctx context.Context, v victim, deadline int64) (victim, bool) {
	v.deadline = deadline
	id := v.id
	rec, ver, err := rt.core.load(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) && errors.Is(err, store.ErrCorruption) {
		rt.core.opts.Logger.Error("receipt: a receipt does not read; the cleaner leaves it and its entry (see idemctl check)",
			"txn_id", id, "err", err)
	}
	var pinned bool
	var until int64
	if err == nil {
		pinned, until = !settled(rec), rec.RetainUntil
		if pinned && plantedIgnoresPin(rec) {
			pinned, until = false, deadline
		}
	}
	switch cleanOf(err, pinned, until, deadline) {
	case cleanLeave:
		return victim{}, false
	case cleanEntry:
		return v, true
	}
	v.receipt, v.rcptVer = true, ver
	if rec.State == Terminal {
		v.tomb, _ = rt.tombstoneOf(id, rec)
		if fault.Planted(fault.BugCleanDropsTombstone) { // planted only under -tags idem_selftest
			v.tomb = nil
		}
	}
	if v.tomb != nil {
		if v.tombVal, err = encodeTomb(v.tomb); err != nil {
			// A bug, not the data's: the receipt stays, refusing its key.
			rt.core.opts.Logger.Error("receipt: the cleaner leaves a receipt whose tombstone would break an invariant",
				"txn_id", id, "err", err)
			return victim{}, false
		}
	}
	return v, true
}

// plantedIgnoresPin is the planted bugs that clean a receipt its debt
// pins (only under -tags idem_selftest).
func plantedIgnoresPin(rec *Record) bool {
	if rec.State == Terminal && fault.Planted(fault.BugCleanIgnoresVisibilityDebt) {
		return true
	}
	return fault.Planted(fault.BugCleanIgnoresDebt)
}

// cleanableSession is cleanable for an ended session's entry, by the same
// decision as a receipt's (cleanOf). An open session is pinned, as a
// receipt with execution debt is: it has no retention entry, and one
// found is not its own.
func (rt *retention) cleanableSession(ctx context.Context, v victim, deadline int64) (victim, bool) {
	it, err := rt.core.store.Get(ctx, sessionKey(v.id))
	var rec *SessionRecord
	if err == nil {
		rec, err = sessionAt(it.Key, it.Value)
	}
	var pinned bool
	var until int64
	if err == nil {
		pinned, until = rec.State == SessionOpen, rec.RetainUntil
	}
	switch cleanOf(err, pinned, until, deadline) {
	case cleanLeave:
		return victim{}, false
	case cleanEntry:
		return v, true
	}
	v.session, v.rcptVer, v.steps = true, it.Version, rec.Steps
	return v, true
}

// cleanAction is what the cleaner does with a due expiry entry.
type cleanAction uint8

const (
	cleanLeave  cleanAction = iota + 1 // leave the entry and its record
	cleanEntry                         // delete the entry alone: a stray
	cleanRecord                        // delete the entry and its record
)

// cleanOf decides what the cleaner does with an expiry entry due at
// deadline from the record it points at, a receipt or an ended session,
// as read (err): gone, the entry is a stray; unreadable or pinned (a
// receipt with debt, an open session), both stay; retained until another
// deadline, the entry is not the record's own any more.
func cleanOf(err error, pinned bool, retainUntil, deadline int64) cleanAction {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return cleanEntry
	case err != nil, pinned:
		return cleanLeave
	case retainUntil != deadline:
		return cleanEntry
	}
	return cleanRecord
}

// deleteVictims deletes with one Apply per try; a victim whose condition
// fails (the receipt changed, or its transaction still holds intents) is
// dropped and the rest retried.
func (rt *retention) deleteVictims(ctx context.Context, jobVer store.Version, vs []victim) (int, error) {
	fence := func(b *store.Batch) { b.AtVersion(lease.JobKey(cleanerJob), jobVer) }
	for _, v := range vs {
		// Steps too many for the write that ended the session, and that a
		// crash kept maintenance from deleting: before the record, so that
		// none is left without it.
		if v.session && v.steps > rt.sess.stepsInlineMax() {
			if err := rt.sess.dropSteps(ctx, v.id, v.steps, fence); err != nil {
				return 0, err
			}
		}
	}
	for len(vs) > 0 {
		b := new(store.Batch).AtVersion(lease.JobKey(cleanerJob), jobVer)
		if fault.Planted(fault.BugCleanUnfenced) { // planted only under -tags idem_selftest
			b = new(store.Batch)
		}
		receipts := 0
		var chunk tombChunk
		for _, v := range vs {
			if v.entry != nil { // nil: listed in a chunk (cleanChunk)
				b.AtVersion(v.entry, v.entryVer).Delete(v.entry)
			}
			switch {
			case v.receipt:
				b.AtVersion(receiptKey(v.id), v.rcptVer).Delete(receiptKey(v.id))
				twopc.ReleaseInto(b, v.id)
				if v.tomb != nil {
					b.Put(tombKey(v.id), v.tombVal)
					chunk.add(v.tomb)
				}
				receipts++
			case v.session:
				b.AtVersion(sessionKey(v.id), v.rcptVer).Delete(sessionKey(v.id))
				receipts++
			}
		}
		if err := fault.Inject(fault.ReceiptCleanBefore); err != nil {
			return 0, err
		}
		chunk.into(b)
		_, err := rt.core.store.Apply(ctx, b)
		switch classifyWrite(err, lease.JobKey(cleanerJob)) {
		case writeDone:
			rt.core.stats.cleaned.Add(uint64(receipts))
			rt.core.stats.tombstoned.Add(uint64(chunk.len()))
			return receipts, nil
		case writeFenced: // a newer incarnation's cleaner holds the job
			rt.core.stats.fenced.Add(1)
			return 0, lease.ErrFenced
		case writeRetry:
			// A receipt changed, or its transaction still holds intents:
			// drop that victim, delete the rest.
		default:
			return 0, err
		}
		kept, ok := dropFailed(err, vs, keyOf)
		if !ok {
			return 0, err
		}
		vs = kept
	}
	return 0, nil
}

func keyOf(key []byte, v victim) bool {
	k := string(key)
	return k == string(v.entry) || k == string(receiptKey(v.id)) || k == string(sessionKey(v.id)) || (len(k) > len(v.id) && k[len(k)-len(v.id)-1:] == "/"+v.id)
}
