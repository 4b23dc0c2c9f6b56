package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
)

// What the harness checks of sessions once the run settles: their records
// observed, their commits asked once more, and the invariants (session.go).

// observeSessions records, between steps, when each asked-for commit's
// receipt is first seen terminal (see effectHistory), and how sessions
// ended, from their records.
func (sc *scenario) observeSessions() {
	ctx := context.Background()
	for _, s := range sc.sessions {
		if s.requested {
			if _, done := sc.obs.sessions[s.idx]; !done {
				if it, err := sc.cl.store.Get(ctx, store.NSReceipt.Key(s.txn)); err == nil {
					s.receiptSeen = true
					if rec, err := receipt.DecodeRecord(it.Value); err == nil && rec.State == receipt.Terminal {
						e := receipt.EnvelopeOf(rec, s.txn)
						class := outNotApplied
						if e.Outcome == receipt.OutcomeCommitted {
							class = outCommitted
						}
						sc.obs.sessions[s.idx] = settled{at: sc.rec.now(), class: class, env: envString(e)}
					}
				}
			}
		}
		sc.observeSessionRecord(ctx, s)
	}
}

func (sc *scenario) observeSessionRecord(ctx context.Context, s *sessionRun) {
	if s.ended != 0 {
		return
	}
	it, err := sc.cl.store.Get(ctx, store.NSSession.Key("rec", s.id))
	if err != nil {
		return
	}
	if rec, err := receipt.DecodeSession(it.Value); err == nil && rec.State != receipt.SessionOpen {
		s.ended, s.reason = rec.State, rec.Reason
	}
}

// cleanSessions marks the sessions whose record or commit receipt the
// cleaner removed: their commits are not retried any more (an answer after
// retention is another request's).
func (sc *scenario) cleanSessions() {
	ctx := context.Background()
	for _, s := range sc.sessions {
		if s.cleaned {
			continue
		}
		_, errRec := sc.cl.store.Get(ctx, store.NSSession.Key("rec", s.id))
		_, errRcpt := sc.cl.store.Get(ctx, store.NSReceipt.Key(s.txn))
		if errors.Is(errRec, store.ErrNotFound) || (s.receiptSeen && errors.Is(errRcpt, store.ErrNotFound)) {
			s.cleaned, s.done = true, true
			sc.count("cleaned-sessions")
		}
	}
}

// finalCommits asks once more for every commit asked for (and not
// cleaned): after stabilization each answer must be terminal — the
// receipt's, or session_aborted — and equal the first (the keys model).
func (sc *scenario) finalCommits(ctx context.Context, cl *client, live []int) {
	for i, s := range sc.sessions {
		if !s.requested || s.cleaned {
			continue
		}
		if out, err := sc.commit(ctx, cl, s, live[i%len(live)]); out.Class == outUnknown {
			sc.violate(fmt.Sprintf("after stabilization, session s%d's commit has no terminal answer (err %v)", s.idx, err))
		}
	}
}

// checkSessions checks, once the system is stable, what every session left
// (as an actor: it reads documents through a node), and returns what each
// committed session adds to each counter. A session applied exactly when
// its first marker exists; then every marker of every stage it staged
// exists, in both tables, and none of any other stage; its commit was
// asked for, and no answer or observation said it did not apply. A session
// that did not apply has no marker at all, and no answer said it
// committed. A marker read from outside any session saw it only if the
// session applied, and only after its commit was asked for; a read after
// a committed answer saw it.
func (sc *scenario) checkSessions(ctx context.Context, tables *table.Tables) map[int]int {
	adds := map[int]int{}
	applied := make([]bool, len(sc.sessions))
	exists := func(ref markerRef) bool {
		_, err := tables.Get(ctx, principal, ref.table, ref.id)
		if err != nil && !isCode(err, code.DocumentNotFound) {
			sc.violate(fmt.Sprintf("read marker %s/%s: %v", ref.table, ref.id, err))
		}
		return err == nil
	}
	for _, s := range sc.sessions {
		sc.observeSessionRecord(ctx, s)
		did := exists(sessMarkers(s.idx, 0)[0])
		applied[s.idx] = did
		for j := range sessStagesMax {
			for _, ref := range sessMarkers(s.idx, j) {
				want := did && j < len(s.landed)
				if got := exists(ref); got != want {
					sc.violate(fmt.Sprintf("session s%d (applied=%v, %d stages staged): marker %s/%s of stage %d present=%v — not all or nothing",
						s.idx, did, len(s.landed), ref.table, ref.id, j, got))
				}
			}
		}
		obs, observed := sc.obs.sessions[s.idx]
		switch {
		case did && !s.requested:
			sc.violate(fmt.Sprintf("session s%d applied, but its commit was never asked for (ended %s %s)", s.idx, s.ended, s.reason))
		case did && s.final != nil && s.final.Class == outNotApplied:
			sc.violate(fmt.Sprintf("session s%d applied, but its commit answered %s", s.idx, s.final.Env))
		case did && observed && obs.class == outNotApplied:
			sc.violate(fmt.Sprintf("session s%d applied, but its receipt says %s", s.idx, obs.env))
		case !did && s.final != nil && s.final.Class == outCommitted:
			sc.violate(fmt.Sprintf("session s%d answered committed (%s), but nothing it staged is there", s.idx, s.final.Env))
		case !did && observed && obs.class == outCommitted:
			sc.violate(fmt.Sprintf("session s%d's receipt is committed (%s), but nothing it staged is there", s.idx, obs.env))
		}
		if did {
			for d, n := range s.incs() {
				adds[d] += n
			}
		}
		sc.tallySession(s, did)
	}
	for _, r := range sc.markerReads {
		s := sc.sessions[r.sess]
		staged := r.stage < len(s.landed)
		switch {
		case r.present && !applied[r.sess]:
			sc.violate(fmt.Sprintf("a reader saw marker %s/%s of session s%d, which never applied (staged data visible)", r.ref.table, r.ref.id, r.sess))
		case r.present && (!s.requested || r.ret < s.firstCall):
			sc.violate(fmt.Sprintf("a reader saw marker %s/%s of session s%d before its commit was asked for (staged data visible)", r.ref.table, r.ref.id, r.sess))
		case !r.present && staged && s.final != nil && s.final.Class == outCommitted && r.call > s.finalRet:
			sc.violate(fmt.Sprintf("a read of marker %s/%s after session s%d's commit was answered committed does not see it", r.ref.table, r.ref.id, r.sess))
		}
	}
	return adds
}

// tallySession counts how session s ended (Result.Outcomes, "sess-*").
func (sc *scenario) tallySession(s *sessionRun, applied bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.outcomes["sess-begun"]++
	conflict := func(env string) bool { return containsCode(env, code.TransactionConflict) }
	obs := sc.obs.sessions[s.idx]
	switch {
	case applied:
		sc.outcomes["sess-committed"]++
	case s.final != nil && conflict(s.final.Env), conflict(obs.env):
		sc.outcomes["sess-conflicted"]++
	case s.aborted:
		sc.outcomes["sess-aborted"]++
	case s.reason == receipt.ReasonExpired:
		sc.outcomes["sess-expired"]++
	case s.reason == receipt.ReasonOwnerLost:
		sc.outcomes["sess-owner-lost"]++
	default:
		sc.outcomes["sess-ended-other"]++
	}
	if s.abandoned {
		sc.outcomes["sess-abandoned"]++
	}
	if s.conflicted {
		sc.outcomes["sess-stage-conflicted"]++
	}
}

// containsCode reports whether env (an envString rendering) carries code c.
func containsCode(env string, c code.Code) bool {
	f := strings.SplitN(env, "|", 4)
	return len(f) > 2 && f[2] == string(c)
}
