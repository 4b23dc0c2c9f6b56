package receipt

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

// A session's commit is a receipt (docs/design.md §14): bound to (principal, the
// commit's Idempotency-Key — the session ID when the client sends none),
// published before anything executes, run through the same create, start
// and decide steps as a keyed batch, and answered — then replayed — from
// its stored envelope. The write that publishes the receipt also ends the
// session (state committed, lease and open entry dropped), so there is no
// state in which both a successor could presume the session aborted and
// its commit run: before that write the session is open, after it the
// receipt is, and a successor finishes the receipt from the staging it
// stores.

// sessionCommitTable is the table part of a commit's binding: no table is
// named "" (table.ValidTableName), so a commit's receipt never collides
// with a keyed batch's under the same key.
const sessionCommitTable = ""

// CommitRequest asks to commit a session.
type CommitRequest struct {
	Principal string
	Session   string
	// Key is the commit's Idempotency-Key ("": the session ID).
	Key string
	// Wait is how long to wait for the outcome of a commit in progress
	// (Prefer: wait=N); capped by Options.WaitMax.
	Wait time.Duration
}

// CommitSession commits open session req.Session exactly once, or answers
// the commit already made: replay, mismatch (the key is bound to another
// request), in progress, adopted — as Execute does for a keyed batch. A
// commit whose optimistic reads no longer hold is a coordinator-proven
// abort, 409 transaction_conflict, stored and replayed like any outcome.
//
// A commit that aborted or was not applied answers retry_with none and
// Retry RetryNewSession (sessionCommitEnvelope), as its receipt stores it;
// a replay is the stored answer, whatever it says.
func (s *Service) CommitSession(ctx context.Context, req CommitRequest) (Answer, error) {
	ans, err := s.sess.commitSession(ctx, req)
	if ans.Terminal && !ans.Replayed {
		ans.Envelope = sessionCommitEnvelope(ans.Envelope)
	}
	return ans, err
}

func (ss *sessions) commitSession(ctx context.Context, req CommitRequest) (Answer, error) {
	key := req.Key
	if key == "" {
		key = req.Session
	}
	if !ValidKey(key) {
		return answerInvalid(code.InvalidKey, "Idempotency-Key must be 1..255 visible ASCII characters"), nil
	}
	if !ValidSessionID(req.Session) {
		return answerCode(errSessionNotFound(req.Session)), nil
	}
	if cerr := ss.exec.enter(req.Principal); cerr != nil {
		return answerRefused(cerr), nil
	}
	defer ss.exec.leave(req.Principal)
	id := Bind(req.Principal, sessionCommitTable, key)
	fp := sessionFingerprint(req.Session)
	deadline := ss.core.clock.Now().Add(min(max(req.Wait, 0), ss.core.opts.WaitMax))
	for round := 0; round < ExecuteAttemptsMax; round++ {
		rec, ver, tomb, err := ss.core.loadOrTomb(ctx, id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return Answer{}, err
		}
		var ans Answer
		switch {
		case tomb != nil:
			ss.core.stats.expired.Add(1)
			return answerExpired(tomb, fp), nil
		case rec == nil:
			ans, err = ss.commitNew(ctx, req, id, key, fp, deadline)
		default:
			f := found{exists: true, refuses: ss.core.refusesWrites() != nil, sameRequest: string(rec.Fingerprint) == string(fp[:]), state: rec.State}
			if ans, ok := ss.core.settledAnswer(dispatch(f), id, rec, nil); ok {
				return ans, nil
			}
			a := &attempt{id: id, rec: rec, ver: ver}
			ans, err = ss.flow.takeOver(ctx, a, deadline)
			ss.core.promised(&ans, a)
		}
		if errors.Is(err, errRetry) {
			continue
		}
		var ce *code.Error
		if errors.As(err, &ce) {
			return answerCode(ce), nil
		}
		ss.core.countAnswer(ans)
		return ans, err
	}
	ss.core.stats.pending.Add(1)
	return answerPending(id, 0, msgKeptChanging, ss.core.retryAfter()), nil
}

// commitNew publishes the commit of an open session whose receipt does
// not exist yet. A session committed already under another key answers
// with that commit's receipt (errRetry-free: one more lookup).
func (ss *sessions) commitNew(ctx context.Context, req CommitRequest, id, key string, fp [32]byte, deadline time.Time) (Answer, error) {
	if ss.core.refusesWrites() != nil {
		return answerUnavailable(id, false), nil
	}
	mu := ss.lockSession(req.Session)
	defer mu.Unlock()
	sa, ended, err := ss.holdSession(ctx, req.Principal, req.Session)
	var elsewhere *HeldElsewhereError
	switch {
	case ended != nil && ended.State == SessionCommitted && ended.TxnID != id:
		return ss.replayCommit(ctx, ended)
	case ended != nil && ended.State == SessionCommitted:
		return Answer{}, errRetry // its receipt is being published: look again
	case errors.As(err, &elsewhere):
		// Its owner commits it: the server forwards the request there.
		return Answer{Envelope: fromCode(code.RequestInProgress, "the session is held by another node; its commit must be asked there", id, OutcomePending),
			RetryAfter: ss.core.retryAfter(), Holder: elsewhere.Holder}, nil
	case err != nil:
		return Answer{}, err
	}
	full, err := ss.staging(ctx, sa)
	if err != nil {
		return Answer{}, err
	}
	canon, err := encMode.Marshal(full)
	if err != nil {
		return Answer{}, err
	}
	a := &attempt{id: id, rec: &Record{Schema: SchemaCurrent, Principal: req.Principal, Table: sessionCommitTable,
		Key: key, Fingerprint: fp[:], Request: canon, Session: req.Session}}
	inline := false
	a.alongside = func(b *store.Batch) error {
		inline = ss.dropStepsInto(b, sa.id, sa.rec.Steps)
		return ss.endCommitted(b, sa, a)
	}
	a.published = func() {
		ss.core.active.Remove(sa.id, sa.held)
		ss.ended(sa.id, sa.rec.Steps, inline)
		ss.core.stats.sessCommitted.Add(1)
	}
	ans, err := ss.flow.create(ctx, a, ss.plans.planSession(req.Principal, full), deadline)
	ss.core.promised(&ans, a)
	return ans, err
}

// endCommitted adds to the write that publishes commit receipt a the end
// of session sa: conditioned on the session being as this process holds
// it, under its claim.
func (ss *sessions) endCommitted(b *store.Batch, sa *sessionAttempt, a *attempt) error {
	b.AtVersion(sessionKey(sa.id), sa.ver).AtVersion(lease.ClaimKey(sa.id), sa.claimVer)
	rec := *sa.rec
	rec.State, rec.Key, rec.TxnID, rec.Owner, rec.Staging = SessionCommitted, a.rec.Key, a.id, nil, nil
	rec.Ended, rec.RetainUntil = a.rec.Created, a.rec.RetainUntil
	return ss.putEnded(b, sa.id, &rec)
}

// replayCommit answers a commit of a session committed under another key
// with that commit's receipt: the session has one commit, whatever key a
// retry sends.
func (ss *sessions) replayCommit(ctx context.Context, sess *SessionRecord) (Answer, error) {
	rec, _, err := ss.core.load(ctx, sess.TxnID)
	if errors.Is(err, store.ErrNotFound) {
		return answerCode(errSessionEnded("", sess)), nil
	}
	if err != nil {
		return Answer{}, err
	}
	if rec.State != Terminal {
		return answerInProgress(sess.TxnID, rec.State, ss.core.retryAfter()), nil
	}
	ss.core.stats.replayed.Add(1)
	return Answer{Envelope: EnvelopeOf(rec, sess.TxnID), Terminal: true, Replayed: true, Expiry: ss.core.expiryOf(rec)}, nil
}

// planSession plans the commit of staging st: the documents as the
// session left them, conditioned on the versions it saw; its result is
// what its staged batches did.
func (p *plans) planSession(principal string, st *table.Staging) planner {
	return func(ctx context.Context, a *attempt) (twopc.Txn, *code.Error, error) {
		if fault.Planted(fault.BugSessionCommitUnconditioned) { // planted only under -tags idem_selftest
			for i := range st.Docs {
				st.Docs[i].Blind = true
			}
		}
		plan, err := p.core.tables.SessionPlan(ctx, principal, st)
		var ce *code.Error
		if errors.As(err, &ce) {
			return twopc.Txn{}, ce, nil
		}
		if err != nil {
			return twopc.Txn{}, nil, err
		}
		result := resultJSON(st.Result)
		return twopc.Txn{ID: a.id, Participants: participantsOf(plan),
			Result: func() ([]byte, error) { return result, nil }}, nil, nil
	}
}

// sessionFingerprint is a commit's request fingerprint: the session it
// commits. A key reused for another session's commit is a mismatch; a
// retry of this one replays.
func sessionFingerprint(session string) [32]byte {
	return sha256.Sum256([]byte("idem/session-commit\x00" + session))
}

// decodeStaging reverses the staging a commit receipt stores; its caller
// names the receipt's key in a failure (planStored).
func decodeStaging(b []byte) (*table.Staging, error) {
	var st table.Staging
	if err := cbor.Unmarshal(b, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// answerCode answers a typed refusal that has no receipt.
func answerCode(ce *code.Error) Answer { return answerRefused(ce) }
