package receipt

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

// Request is one keyed batch.
type Request struct {
	Principal string
	Table     string
	Key       string
	Batch     *table.Batch
	// Wait is how long the caller will wait for a terminal envelope when the
	// receipt is in progress (Prefer: wait=N); capped by Options.WaitMax.
	Wait time.Duration
	// FirstSent is when the client first sent this request (Azure's
	// Repeatability-First-Sent, AEP-155's first_sent); zero if it did not
	// say. A request first sent longer ago than the key is remembered
	// (KeyMemory) finds no receipt and no tombstone for a reason it cannot
	// tell — forgotten, or never sent — and is refused instead of run.
	FirstSent time.Time
	// BodyDigest is BodyDigest of the raw bytes Batch was decoded from,
	// if it was: the receipt keeps it, so that a retry of the same bytes
	// replays without being decoded (ReplayVerbatim). Nil: none.
	BodyDigest []byte
	// Seen is what ReplayVerbatimOrSeen read of this key, if it was asked
	// first: Execute starts from it instead of reading the key again.
	Seen Seen
}

// Execute runs the keyed flow of docs/design.md §5: lookup, compare, replay or
// adopt — none of which uses execution capacity — or create the receipt
// and execute. The error is for failures the caller cannot turn into an
// answer (the store is closed, a record does not decode); every expected
// outcome, including in-progress and pending, is an Answer.
func (s *Service) Execute(ctx context.Context, req Request) (Answer, error) {
	if ans, bad := invalid(req); bad {
		return ans, nil
	}
	if req.FirstSent.After(s.core.clock.Now().Add(firstSentSkewMax)) {
		return answerInvalid(code.InvalidRequest, "Repeatability-First-Sent lies in the future"), nil
	}
	cb, fp, err := fingerprint(req.Table, req.Batch)
	if err != nil {
		return answerInvalid(code.InvalidRequest, err.Error()), nil
	}
	if cerr := s.exec.enter(req.Principal); cerr != nil {
		return answerRefused(cerr), nil
	}
	defer s.exec.leave(req.Principal)
	x := execution{req: req, id: req.Seen.idFor(req.Principal, req.Table, req.Key), canon: cb, fp: fp,
		deadline: s.core.clock.Now().Add(min(max(req.Wait, 0), s.core.opts.WaitMax))}
	for round := 0; round < ExecuteAttemptsMax; round++ {
		ans, err := s.executeRound(ctx, &x, round)
		if errors.Is(err, errRetry) {
			continue
		}
		if err == nil && s.core.store.Capabilities().MultiGet != nil {
			// A retry of it is looked up first (createfirst.go). Only a
			// store that creates first asks (createFirst, verbatim.go): on
			// the local engine the set would cost a keyed request a hash,
			// a lock, a map insert and every 32 768 keys a new map, for nothing.
			s.recent.add(x.id)
		}
		return ans, err
	}
	s.core.stats.pending.Add(1)
	return answerPending(x.id, 0, msgKeptChanging, s.core.retryAfter()), nil
}

// execution is one keyed request inside Execute: what every round of it
// shares.
type execution struct {
	req      Request
	id       string
	canon    []byte // the batch's canonical bytes (fingerprint)
	fp       [32]byte
	deadline time.Time
	keys     receiptKeys // built by the first lookup that reads them, then the create's (receiptkeys.go)
}

// lookup is what a round read of a key: its receipt, the receipt's
// version, its tombstone, and on a MultiGetter store the planner the
// table's metadata made.
type lookup struct {
	rec  *Record
	ver  store.Version
	tomb *Tombstone
	plan planner
	// blind: nothing was read, and plan is made from the table's cached
	// metadata (createFirst): the round creates the receipt if absent.
	blind bool
}

// lookUp reads the key's receipt and tombstone for round.
func (s *Service) lookUp(ctx context.Context, x *execution, round int) (lookup, error) {
	var l lookup
	var err error
	if r, v, t, ok := x.req.seen(x.id); ok {
		l.rec, l.ver, l.tomb = r, v, t
	} else if s.core.store.Capabilities().MultiGet != nil && round == 0 {
		if plan, ok := s.createFirst(x); ok {
			return lookup{plan: plan, blind: true}, nil
		}
		// No cached metadata, or a likely retry: the receipt, its
		// tombstone and the table's metadata in one round trip on a
		// store that reads several keys at once (etcd): a new key
		// needs all three. (On the local engine
		// reads cost no round trip, and a replay would pay for the
		// metadata for nothing.)
		var meta store.Item
		l.rec, l.ver, l.tomb, meta, err = s.core.loadWithMeta(ctx, x.id, x.req.Principal, x.req.Table)
		l.plan = s.plans.planRequestWith(x.req, meta)
	} else {
		if x.keys.receipt == nil {
			x.keys = keysOf(x.id)
		}
		l.rec, l.ver, l.tomb, err = s.core.loadOrTombAt(ctx, x.id, x.keys)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return l, err
	}
	return l, nil
}

// executeRound looks the key up and acts on what it found; errRetry
// sends Execute round again (the receipt changed under it).
func (s *Service) executeRound(ctx context.Context, x *execution, round int) (Answer, error) {
	l, err := s.lookUp(ctx, x, round)
	if err != nil {
		return Answer{}, err
	}
	req, id := x.req, x.id
	f := found{exists: l.rec != nil, expired: l.tomb != nil, refuses: s.core.refusesWrites() != nil}
	if f.exists {
		f.sameRequest, f.state = bytes.Equal(l.rec.Fingerprint, x.fp[:]), l.rec.State
	}
	act := dispatch(f)
	if l.blind && (act != actCreate || s.core.spaceFull()) {
		// What createFirst checked changed since: answers for a missing
		// key are given only once a read says it is missing.
		return Answer{}, errRetry
	}
	if act == actExpired {
		if fault.Planted(fault.BugExpiredReexecutes) { // planted only under -tags idem_selftest
			_, _ = s.ExecuteFast(ctx, req.Principal, req.Table, req.Batch)
		}
		s.core.stats.expired.Add(1)
		return answerExpired(l.tomb, x.fp), nil
	}
	if ans, ok := s.core.settledAnswer(act, id, l.rec, req.Batch); ok {
		if act == actReplay && fault.Planted(fault.BugReexecuteOnReplay) { // planted only under -tags idem_selftest
			_, _ = s.ExecuteFast(ctx, req.Principal, req.Table, req.Batch) // planted bug: the harness must catch it
		}
		return ans, nil
	}
	var ans Answer
	switch act {
	case actCreate:
		if lim := s.KeyMemory(); !req.FirstSent.IsZero() && s.core.clock.Now().Sub(req.FirstSent) > lim {
			return answerTooOld(id, req.FirstSent, lim), nil
		}
		if until, ok := s.fenced(req.FirstSent, s.core.clock.Now()); ok {
			return s.answerMayHaveExecuted(id, req.FirstSent, until), nil
		}
		if s.core.spaceFull() {
			return answerStoreFull(id), nil
		}
		// The record's fingerprint is the attempt's copy: a slice of x.fp
		// would move every request's execution to the heap.
		a := &attempt{id: id, fp: x.fp, cachedPlan: l.blind, rkeys: x.keys}
		a.rec = &Record{Schema: SchemaCurrent, Principal: req.Principal, Table: req.Table,
			Key: req.Key, Fingerprint: a.fp[:], request: lazyRequest{table: req.Table, batch: x.canon}, Entries: req.Batch.EntryDigests(), BodyDigest: bodyDigestOf(req)}
		plan := l.plan // the metadata-carrying one on a MultiGetter store; else planRequest
		if plan == nil {
			plan = s.plans.planRequest(req)
		}
		ans, err = s.flow.create(ctx, a, plan, x.deadline)
		if a.found != nil && errors.Is(err, errRetry) {
			x.req.Seen = *a.found // the receipt the create met: no read for it
		}
		s.core.promised(&ans, a)
	case actTakeOver:
		a := &attempt{id: id, rec: l.rec, ver: l.ver}
		ans, err = s.flow.takeOver(ctx, a, x.deadline)
		s.core.promised(&ans, a)
	}
	if errors.Is(err, errRetry) {
		return ans, err
	}
	s.core.countAnswer(ans)
	return ans, err
}

// settledAnswer is the answer of a lookup whose action leaves the receipt
// as it is — the store refuses writes, the key is bound to another
// request, or the receipt is terminal and replays — and ok=false for the
// actions that work on it (create, take over). b is the request's batch,
// for a mismatch to say what differs (nil: a session's commit).
func (c *core) settledAnswer(act action, id string, rec *Record, b *table.Batch) (ans Answer, ok bool) {
	switch act {
	case actUnavailable:
		return answerUnavailable(id, false), true
	case actUnavailablePending:
		return answerUnavailable(id, true), true
	case actMismatch:
		c.stats.mismatches.Add(1)
		return answerMismatch(id, rec, b), true
	case actReplay:
		c.stats.replayed.Add(1)
		return Answer{Envelope: EnvelopeOf(rec, id), Terminal: true, Replayed: true, Expiry: c.expiryOf(rec)}, true
	}
	return Answer{}, false
}

// firstSentSkewMax is how far in the future Request.FirstSent may lie (the
// client's clock ahead of ours) before the request is refused as invalid.
const firstSentSkewMax = 5 * time.Minute

// KeyMemory is how long after a receipt completes its key is still known
// here — by the receipt, then by its tombstone: TombstoneRetention, or
// Retention with tombstones off. (Measured from completion, which is after
// the first send: a request first sent within it, and never seen, cannot
// have been forgotten.)
func (s *Service) KeyMemory() time.Duration {
	return max(s.core.opts.Retention, s.core.opts.TombstoneRetention)
}

// promised gives a terminal answer that a's steps produced the promise of
// the record they made terminal (a.final).
func (c *core) promised(ans *Answer, a *attempt) {
	if ans.Terminal && ans.Expiry == (Expiry{}) {
		ans.Expiry = c.expiryOf(a.final)
	}
}

// bodyDigestOf is req's body digest, if it is one.
func bodyDigestOf(req Request) []byte {
	if len(req.BodyDigest) != bodyDigestLen {
		return nil
	}
	return req.BodyDigest
}

// invalid answers a request that is malformed on its own: 400, no
// receipt (docs/design.md §5.1).
func invalid(req Request) (Answer, bool) {
	if !ValidKey(req.Key) {
		return answerInvalid(code.InvalidKey, "Idempotency-Key must be 1..255 visible ASCII characters"), true
	}
	if !table.ValidTableName(req.Table) {
		cerr := table.InvalidTableName(req.Table)
		return answerInvalid(cerr.Code, cerr.Message), true
	}
	if req.Batch == nil {
		return answerInvalid(code.InvalidRequest, "missing batch"), true
	}
	if cerr := req.Batch.Validate(); cerr != nil {
		return answerInvalid(cerr.Code, cerr.Message), true
	}
	return Answer{}, false
}

func (c *core) countAnswer(a Answer) {
	switch a.Code {
	case code.RequestInProgress:
		c.stats.inProgress.Add(1)
	case code.ReceiptPending:
		c.stats.pending.Add(1)
	case code.Overloaded:
		c.stats.overloaded.Add(1)
	}
}

// takeOver continues a pending or started receipt: one another goroutine
// here works on (join its flight), ours, adoptable (older incarnation, or
// expired lease), or another live owner's (wait, or answer in progress).
func (fl *flow) takeOver(ctx context.Context, a *attempt, deadline time.Time) (Answer, error) {
	f, mine := fl.exec.beginFlight(a.id)
	if !mine {
		return fl.awaitLocal(ctx, a.id, f, deadline)
	}
	act, err := fl.hold(ctx, a, deadline)
	if errors.Is(err, errNotOurs) {
		fl.exec.endFlight(a.id, f)
		if act == holdWait {
			return fl.awaitOwner(ctx, a, deadline)
		}
		return fl.heldElsewhere(a), nil
	}
	defer fl.exec.endFlight(a.id, f)
	if err != nil {
		return fl.stuck(a, classifyStep(err), err)
	}
	if next(a.rec.State) == stepStart {
		sl, ok := fl.exec.acquire(ctx, deadline)
		if !ok {
			return fl.exec.refuseExecutor(a.id), nil
		}
		defer fl.exec.release(sl)
		plan, unlock, ok := fl.planLatched(ctx, a, true)
		if !ok {
			return fl.exec.refuseExecutor(a.id), nil // still pending: a retry runs it
		}
		defer unlock()
		return fl.start(ctx, a, plan)
	}
	return fl.recov.reconcile(ctx, a)
}

// ExecuteFast runs a key-less batch on the fast path: preflight and one
// atomic Apply, no receipt. Failures are *code.Error where typed.
func (s *Service) ExecuteFast(ctx context.Context, principal, tbl string, b *table.Batch) (table.Result, error) {
	// A batch with nothing to write never reaches the store, which would
	// answer it 201 while it accepts no writes.
	if s.core.refusesWrites() != nil {
		return table.Result{}, errUnavailable()
	}
	if s.core.spaceFull() {
		return table.Result{}, errStoreFull()
	}
	plan, err := s.core.tables.Preflight(ctx, principal, tbl, b)
	if err != nil {
		return table.Result{}, err
	}
	// The same latches as keyed batches (doclatch.go): a key-less write
	// of a document a keyed batch is committing waits for it, rather than
	// fail its conditions or meet its intents.
	unlock, ok := s.exec.latchDocs(ctx, twopc.Txn{Participants: participantsOf(plan)})
	if !ok {
		return table.Result{}, code.Errorf(code.TransactionConflict,
			"documents of the batch stayed held by other transactions for %v", DocWaitMax)
	}
	defer unlock()
	return s.core.tables.ApplyFast(ctx, plan)
}
