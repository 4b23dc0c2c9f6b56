package receipt

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
)

// Staging and reading: each step computes on a copy of the session's
// staging and makes the copy durable with one Apply conditioned on the
// record's version and fenced by the session's claim, so that a refused or
// failed step leaves the session exactly as it was, and a session taken
// over elsewhere cannot be written by its old owner.

// TableBatch is one table's batch in a staged step.
type TableBatch struct {
	Table string
	Batch *table.Batch
}

// StageBatchesMax bounds the table batches of one staged step.
const StageBatchesMax = table.SessionTablesMax

// StageSession stages batches — each on one of principal's tables, in
// order — in open session id as one step: validated and computed at once
// on the session's view (its own writes over the committed state),
// recording the versions it read. A refusal of any batch leaves the
// session as it was. It returns what each batch did and the session after
// the step.
func (s *Service) StageSession(ctx context.Context, principal, id string, batches []TableBatch) ([]table.Result, Session, error) {
	switch {
	case len(batches) == 0:
		return nil, Session{}, code.Errorf(code.InvalidRequest, "nothing to stage: give at least one table's batch")
	case len(batches) > StageBatchesMax:
		return nil, Session{}, code.Errorf(code.InvalidRequest, "a step stages at most %d tables' batches", StageBatchesMax)
	}
	for _, tb := range batches {
		if tb.Batch == nil {
			return nil, Session{}, code.Errorf(code.InvalidRequest, "missing batch for table %q", tb.Table)
		}
		if cerr := tb.Batch.Validate(); cerr != nil {
			return nil, Session{}, cerr
		}
	}
	res := make([]table.Result, len(batches))
	sess, err := s.sess.sessionStep(ctx, principal, id, true, func(st *table.Staging) error {
		for i, tb := range batches {
			var err error
			if res[i], err = s.core.tables.SessionStage(ctx, principal, st, tb.Table, tb.Batch); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, Session{}, err
	}
	return res, sess, nil
}

// ReadSession reads document doc of principal's table tbl through open
// session id: the session's own write if it made one, else the committed
// document — whose version the session records the first time, so that
// its commit conflicts if the document changes meanwhile.
func (s *Service) ReadSession(ctx context.Context, principal, id, tbl, doc string) (json.RawMessage, error) {
	var out json.RawMessage
	var missing error
	_, err := s.sess.sessionStep(ctx, principal, id, false, func(st *table.Staging) error {
		// Only a first read changes what the commit is conditioned on
		// (st.Changed): a repeated one writes nothing. A first read that
		// finds no document records that too — the commit must abort if
		// one appears meanwhile — so it is no failure of the step.
		var err error
		out, err = s.core.tables.SessionRead(ctx, principal, st, tbl, doc)
		var ce *code.Error
		if errors.As(err, &ce) && ce.Code == code.DocumentNotFound {
			missing, err = err, nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, missing
}

// sessionStep runs step on a copy of open session id's staging under its
// stripe lock and an executor slot, and makes the copy durable when step
// changed documents (and no error): one step; staged counts it as a staged
// batch.
func (ss *sessions) sessionStep(ctx context.Context, principal, id string, staged bool, step func(*table.Staging) error) (Session, error) {
	if err := ss.core.refusesWrites(); err != nil {
		return Session{}, errUnavailable()
	}
	if cerr := ss.exec.enter(principal); cerr != nil {
		return Session{}, cerr
	}
	defer ss.exec.leave(principal)
	mu := ss.lockSession(id)
	defer mu.Unlock()
	sa, _, err := ss.holdSession(ctx, principal, id)
	if err != nil {
		return Session{}, err
	}
	sl, ok := ss.exec.acquireFor(ctx, time.Time{}, lease.KindSession)
	if !ok {
		return Session{}, ss.exec.errExecutorFull()
	}
	defer ss.exec.release(sl)
	full, err := ss.staging(ctx, sa)
	if err != nil {
		return Session{}, err
	}
	st := full.Clone()
	if err := step(st); err != nil {
		return Session{}, err
	}
	docs := st.Changed()
	if len(docs) == 0 {
		return sessionOf(id, sa.rec), nil
	}
	if sa.rec.Steps >= SessionStepsMax {
		return Session{}, code.Errorf(code.InvalidRequest, "a session takes at most %d steps that change it (stages and first reads); commit it, or begin another", SessionStepsMax)
	}
	rec := *sa.rec
	rec.Staging, rec.Result = st.Header(), st.Result
	rec.Docs, rec.Writes = len(st.Docs), st.Writes()
	if staged {
		rec.Stages++
	}
	if err := ss.writeSession(ctx, sa, &rec, docs, st); err != nil {
		return Session{}, err
	}
	return sessionOf(id, &rec), nil
}

// writeSession makes rec the open session's record and docs — what the
// step changed — its next step, fenced; full is the staging after it.
func (ss *sessions) writeSession(ctx context.Context, sa *sessionAttempt, rec *SessionRecord, docs []table.SessionDoc, full *table.Staging) error {
	rec.Steps++
	step, err := encMode.Marshal(docs)
	if err != nil {
		return err
	}
	val, err := encodeSession(rec)
	if err != nil {
		return err
	}
	b := new(store.Batch).AtVersion(sessionKey(sa.id), sa.ver).AtVersion(lease.ClaimKey(sa.id), sa.claimVer).
		Put(sessionKey(sa.id), val).Put(sessionStepKey(sa.id, rec.Steps), step)
	if err := fault.Inject(fault.SessionStageBefore); err != nil {
		return err
	}
	v, err := ss.core.store.Apply(ctx, b)
	if err != nil {
		return ss.sessionWriteError(ctx, sa, err)
	}
	sa.rec, sa.ver = rec, v
	ss.stagings.put(sa.id, v, full)
	return nil
}

// SessionInfo reports session id of principal as stored: any node answers
// it, whoever holds the session.
func (s *Service) SessionInfo(ctx context.Context, principal, id string) (Session, error) {
	rec, _, err := s.sess.loadSession(ctx, principal, id)
	if err != nil {
		return Session{}, err
	}
	out := sessionOf(id, rec)
	if rec.State == SessionCommitted && rec.TxnID != "" {
		// The session's state says its commit was asked for; the commit's
		// receipt says how it ended (issue 37: an aborted commit must not
		// read as committed).
		v, err := s.lookupID(ctx, rec.TxnID)
		switch {
		case err == nil && v.State == Terminal:
			out.Outcome, out.Code = v.Outcome, v.Envelope.Code
		case err == nil && v.State == Expired:
			out.Outcome = v.Outcome
		case err == nil:
			out.Outcome = OutcomePending
		case !errors.Is(err, store.ErrNotFound):
			return Session{}, err
		}
	}
	return out, nil
}
