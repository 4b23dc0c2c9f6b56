package receipt

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/table"
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
}

// Execute runs the keyed flow of DESIGN §5: lookup, compare, replay or
// adopt — none of which uses execution capacity — or create the receipt
// and execute. The error is for failures the caller cannot turn into an
// answer (the store is closed, a record does not decode); every expected
// outcome, including in-progress and pending, is an Answer.
func (s *Service) Execute(ctx context.Context, req Request) (Answer, error) {
	if !ValidKey(req.Key) {
		return answerInvalid(code.InvalidKey, "Idempotency-Key must be 1..255 visible ASCII characters"), nil
	}
	if !table.ValidTableName(req.Table) {
		cerr := table.InvalidTableName(req.Table)
		return answerInvalid(cerr.Code, cerr.Message), nil
	}
	if req.Batch == nil {
		return answerInvalid(code.InvalidRequest, "missing batch"), nil
	}
	if cerr := req.Batch.Validate(); cerr != nil {
		return answerInvalid(cerr.Code, cerr.Message), nil
	}
	canon, fp, err := Canonical(req.Table, req.Batch)
	if err != nil {
		return answerInvalid(code.InvalidRequest, err.Error()), nil
	}
	id := Bind(req.Principal, req.Table, req.Key)
	deadline := s.clock.Now().Add(min(max(req.Wait, 0), s.opts.WaitMax))
	for attempt := 0; attempt < ExecuteAttemptsMax; attempt++ {
		rec, ver, err := s.load(ctx, id)
		var ans Answer
		// A store that accepts no writes still replays terminal receipts
		// and refuses mismatches; nothing else can be served until it is
		// reopened.
		refused := s.refusesWrites() != nil
		switch {
		case refused && errors.Is(err, engine.ErrNotFound):
			return answerUnavailable(id, false), nil
		case errors.Is(err, engine.ErrNotFound):
			ans, err = s.create(ctx, req, id, canon, fp[:], deadline)
		case err != nil:
			return Answer{}, err
		case !bytes.Equal(rec.Fingerprint, fp[:]):
			s.stats.mismatches.Add(1)
			return answerMismatch(id, rec), nil
		case rec.State == Terminal:
			if fault.Planted(fault.BugReexecuteOnReplay) { // planted only under -tags idem_selftest
				_, _ = s.ExecuteFast(ctx, req.Principal, req.Table, req.Batch) // planted bug: the harness must catch it
			}
			s.stats.replayed.Add(1)
			return Answer{Envelope: EnvelopeOf(rec, id), Terminal: true, Replayed: true}, nil
		case refused:
			return answerUnavailable(id, true), nil
		default:
			ans, err = s.takeOver(ctx, id, rec, ver, deadline)
		}
		if errors.Is(err, errRetry) {
			continue
		}
		s.countAnswer(ans)
		return ans, err
	}
	s.stats.pending.Add(1)
	return answerPending(id, 0, "the receipt kept changing under this request; retry with the same key", s.retryAfter()), nil
}

func (s *Service) countAnswer(a Answer) {
	switch a.Code {
	case code.RequestInProgress:
		s.stats.inProgress.Add(1)
	case code.ReceiptPending:
		s.stats.pending.Add(1)
	case code.Overloaded:
		s.stats.overloaded.Add(1)
	}
}

// create publishes a new receipt: terminal not_applied when preflight
// fails; otherwise started together with the transaction's begin when an
// executor slot is free, or pending when none is.
func (s *Service) create(ctx context.Context, req Request, id string, canon, fp []byte, deadline time.Time) (Answer, error) {
	f, mine := s.beginFlight(id)
	if !mine {
		return s.awaitLocal(ctx, id, f, deadline)
	}
	defer s.endFlight(id, f)
	now := s.clock.Now()
	rec := &Record{Schema: SchemaCurrent, Principal: req.Principal, Table: req.Table, Key: req.Key,
		Fingerprint: fp, Created: now.UnixMilli(), RetainUntil: now.Add(s.opts.Retention).UnixMilli()}
	plan, err := s.tables.Preflight(ctx, req.Principal, req.Table, req.Batch)
	var ce *code.Error
	if errors.As(err, &ce) {
		return s.publishNotApplied(ctx, id, rec, ce)
	}
	if err != nil {
		return Answer{}, err
	}
	rec.Request = canon
	if !s.acquire(ctx, deadline) {
		return s.createPending(ctx, id, rec)
	}
	defer s.release()
	return s.createStarted(ctx, id, rec, plan)
}

// acquire takes an executor slot, waiting until deadline at most.
func (s *Service) acquire(ctx context.Context, deadline time.Time) bool {
	select {
	case s.exec <- struct{}{}:
		return true
	default:
	}
	d := deadline.Sub(s.clock.Now())
	if d <= 0 {
		return false
	}
	select {
	case s.exec <- struct{}{}:
		return true
	case <-s.clock.After(d):
		return false
	case <-ctx.Done():
		return false
	}
}

func (s *Service) release() { <-s.exec }

// publishNotApplied makes a preflight failure the receipt's terminal answer:
// deterministic, decided before anything started.
func (s *Service) publishNotApplied(ctx context.Context, id string, rec *Record, ce *code.Error) (Answer, error) {
	env := notApplied(ce, id)
	now := s.clock.Now()
	rec.State, rec.Completed, rec.Envelope = Terminal, now.UnixMilli(), env.stored()
	val, err := EncodeRecord(rec)
	if err != nil {
		return Answer{}, err
	}
	b := new(engine.Batch).Absent(receiptKey(id)).Put(receiptKey(id), val).Put(expiryKey(rec.RetainUntil, id), nil)
	if err := fault.Inject(fault.ReceiptCreateBefore); err != nil {
		return Answer{}, err
	}
	_, err = s.store.Apply(ctx, b)
	switch {
	case errors.Is(err, engine.ErrConditionFailed):
		return Answer{}, errRetry
	case errors.Is(err, engine.ErrAmbiguous):
		return answerPending(id, 0, "publishing the receipt had an unknown outcome; retry with the same key", s.retryAfter()), nil
	case err != nil:
		return Answer{}, err
	}
	s.countTerminal(env)
	return Answer{Envelope: env, Terminal: true}, nil
}

// createPending publishes a pending receipt when no executor slot is free:
// a retry with the same key, or maintenance, runs it.
func (s *Service) createPending(ctx context.Context, id string, rec *Record) (Answer, error) {
	rec.State = Pending
	until := s.clock.Now().Add(s.opts.LeaseTTL)
	b := new(engine.Batch).Absent(receiptKey(id))
	held := lease.ClaimNew(b, id, s.owner, until)
	claim := held.Claim()
	rec.Owner = &claim
	val, err := EncodeRecord(rec)
	if err != nil {
		return Answer{}, err
	}
	b.Put(receiptKey(id), val).Put(recoveryKey(s.owner.Node, id), nil).Put(expiryKey(rec.RetainUntil, id), nil)
	s.active.Add(held)
	if err := fault.Inject(fault.ReceiptCreateBefore); err != nil {
		s.active.Remove(id, held)
		return Answer{}, err
	}
	v, err := s.store.Apply(ctx, b)
	switch {
	case errors.Is(err, engine.ErrConditionFailed):
		s.active.Remove(id, held)
		return Answer{}, errRetry
	case errors.Is(err, engine.ErrAmbiguous):
		held.Unconfirm()
		return answerPending(id, 0, "publishing the receipt had an unknown outcome; retry with the same key", s.retryAfter()), nil
	case err != nil:
		s.active.Remove(id, held)
		return Answer{}, err
	}
	held.Confirmed(v, until)
	return answerOverloaded(id, s.retryAfter()), nil
}

// awaitLocal waits for another goroutine of this process working on id.
func (s *Service) awaitLocal(ctx context.Context, id string, f *flight, deadline time.Time) (Answer, error) {
	if s.waitFlight(ctx, f, deadline) {
		return Answer{}, errRetry
	}
	return answerInProgress(id, Started, s.retryAfter()), nil
}

// takeOver continues a pending or started receipt: ours (no local flight),
// adoptable (older incarnation, or expired lease), or someone else's (wait
// or answer in-progress).
func (s *Service) takeOver(ctx context.Context, id string, rec *Record, ver engine.Version, deadline time.Time) (Answer, error) {
	f, mine := s.beginFlight(id)
	if !mine {
		return s.awaitLocal(ctx, id, f, deadline)
	}
	held, err := s.hold(ctx, id, rec, ver)
	if errors.Is(err, errNotOurs) {
		s.endFlight(id, f)
		return s.awaitOwner(ctx, id, rec.State, ver, deadline)
	}
	defer s.endFlight(id, f)
	if err != nil {
		return s.pendingOnError(id, rec.State, err)
	}
	switch rec.State {
	case Pending:
		if !s.acquire(ctx, deadline) {
			return answerOverloaded(id, s.retryAfter()), nil
		}
		defer s.release()
		return s.executePending(ctx, id, rec, ver, held)
	default:
		return s.reconcile(ctx, id, rec, ver, held)
	}
}

var errNotOurs = errors.New("receipt: held by another live owner")

// hold returns this process's hold on a mutable receipt, adopting it if the
// lease allows. errNotOurs means another live owner has it.
func (s *Service) hold(ctx context.Context, id string, rec *Record, ver engine.Version) (*lease.Held, error) {
	st, err := lease.Read(ctx, s.store, id)
	if err != nil {
		return nil, err
	}
	switch {
	case st.ClaimVersion == 0:
		return nil, errRetry // the receipt became immutable meanwhile
	case st.Claim.Of(s.owner):
		if h, ok := s.active.Get(id); ok && h.Claim() == st.Claim && h.Status() != lease.Lost {
			if err := h.Resync(ctx, s.store); err != nil {
				return nil, err
			}
			return h, nil
		}
		h := lease.Resume(id, st)
		s.active.Add(h)
		return h, nil
	case lease.MayAdopt(st, s.owner, s.clock.Now()):
		return s.adopt(ctx, id, ver, st)
	}
	return nil, errNotOurs
}

// adopt moves a receipt to this owner with one CAS on its lease, its
// unchanged record and its recovery entry.
func (s *Service) adopt(ctx context.Context, id string, ver engine.Version, st lease.State) (*lease.Held, error) {
	until := s.clock.Now().Add(s.opts.LeaseTTL)
	b := new(engine.Batch).AtVersion(receiptKey(id), ver)
	held := lease.ClaimAdopt(b, id, st, s.owner, until)
	b.Delete(recoveryKey(st.Claim.Node, id)).Put(recoveryKey(s.owner.Node, id), nil)
	s.active.Add(held)
	if err := fault.Inject(fault.ReceiptAdoptBefore); err != nil {
		s.active.Remove(id, held)
		return nil, err
	}
	v, err := s.store.Apply(ctx, b)
	switch {
	case errors.Is(err, engine.ErrConditionFailed):
		s.active.Remove(id, held)
		return nil, errRetry // renewed, adopted by someone else, or changed
	case errors.Is(err, engine.ErrAmbiguous):
		held.Unconfirm()
		return nil, err
	case err != nil:
		s.active.Remove(id, held)
		return nil, err
	}
	held.Confirmed(v, until)
	s.stats.adopted.Add(1)
	s.opts.Logger.Info("receipt: adopted", "txn_id", id, "from", st.Claim.Node, "from_incarnation", st.Claim.Incarnation)
	return held, nil
}

// awaitOwner polls a receipt another live owner holds until it is terminal,
// changes, or its lease expires (then the caller adopts), or deadline.
func (s *Service) awaitOwner(ctx context.Context, id string, st State, ver engine.Version, deadline time.Time) (Answer, error) {
	for {
		d := deadline.Sub(s.clock.Now())
		if d <= 0 || !s.sleep(ctx, min(d, s.opts.WaitPoll)) {
			return answerInProgress(id, st, s.retryAfter()), nil
		}
		it, err := s.store.Get(ctx, receiptKey(id))
		if err != nil || it.Version != ver {
			return Answer{}, errRetry
		}
		ls, err := lease.Read(ctx, s.store, id)
		if err == nil && lease.MayAdopt(ls, s.owner, s.clock.Now()) {
			return Answer{}, errRetry
		}
	}
}

// pendingOnError answers a request whose receipt could not be advanced: the
// receipt keeps its state and a retry with the same key converges.
func (s *Service) pendingOnError(id string, st State, err error) (Answer, error) {
	switch {
	case errors.Is(err, errRetry):
		return Answer{}, errRetry
	case errors.Is(err, lease.ErrFenced):
		s.stats.fenced.Add(1)
		return answerInProgress(id, st, s.retryAfter()), nil
	case errors.Is(err, engine.ErrAmbiguous), errors.Is(err, lease.ErrUncertain):
		return answerPending(id, st, "the outcome is not known yet; retry with the same key", s.retryAfter()), nil
	}
	return Answer{}, err
}
