package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/table"
)

// The session clients' legs: begin, stage, read, abort, commit, and the
// outside readers of session markers (session.go has the run's state).

// sessionClient is a client that runs sessions (client.sess).
type sessionClient struct {
	cur *sessionRun
}

// sessionLeg plays one step of client cl's sessions, drawing its choices
// from seed (one draw of the client's own stream, whatever happens here,
// so that the trace does not depend on outcomes). n is the node a new
// session begins on. It returns the node that hit an injected crash (-1:
// none).
func (sc *scenario) sessionLeg(ctx context.Context, cl *client, n int, seed uint64) int {
	rng := rand.New(rand.NewPCG(seed, 0x5e55))
	for range legActionsMax {
		s := cl.sess.cur
		if s == nil || s.done {
			var crashed int
			s, crashed = sc.beginSession(ctx, cl, n, rng)
			if s == nil {
				return crashed
			}
			cl.sess.cur = s
		} else {
			cont, crashed := sc.sessionAction(ctx, cl, s, n, rng)
			if crashed >= 0 || !cont {
				return crashed
			}
		}
		if rng.Float64() < legPause {
			return -1
		}
	}
	return -1
}

// target is the node a session's call goes to: its owner, unless that is
// down or the client (rarely) asks another node — which must refuse
// (held elsewhere) or presume the session aborted.
func (sc *scenario) target(s *sessionRun, n int, rng *rand.Rand) int {
	if rng.Float64() < 0.1 || !sc.cl.nodes[s.node].up {
		return n
	}
	return s.node
}

func (sc *scenario) beginSession(ctx context.Context, cl *client, n int, rng *rand.Rand) (*sessionRun, int) {
	sc.mu.Lock()
	full := len(sc.sessions) >= sessionsMax
	sc.mu.Unlock()
	if full {
		return nil, -1
	}
	ttl := sessTTLMin + time.Duration(rng.Int64N(int64(sessTTLSpan/time.Millisecond)))*time.Millisecond
	stages := 1 + rng.IntN(sessStagesMax)
	end := endCommit
	switch r := rng.Float64(); {
	case r < 0.12:
		end = endAbort
	case r < 0.28:
		end = endAbandon
	}
	ownKey := rng.IntN(2) == 0
	info, err := sc.cl.nodes[n].svc.BeginSession(ctx, principal, ttl)
	sc.countOp("s-begin")
	if err != nil {
		if errors.Is(err, fault.ErrInjected) {
			return nil, n
		}
		return nil, -1
	}
	s := &sessionRun{id: info.ID, node: n, stages: stages, end: end, seen: map[int]int{}}
	sc.mu.Lock()
	s.idx = len(sc.sessions)
	sc.sessions = append(sc.sessions, s)
	sc.mu.Unlock()
	key := s.id
	if ownKey {
		s.key = fmt.Sprintf("sk-%d", s.idx)
		key = s.key
	}
	s.txn = receipt.Bind(principal, "", key)
	sc.logSession(s, fmt.Sprintf("begun on node-%d ttl %v: %d stages, end %d, key %q", n, ttl, stages, end, s.key), nil)
	return s, -1
}

// sessionAction takes s one action further; false ends the leg.
func (sc *scenario) sessionAction(ctx context.Context, cl *client, s *sessionRun, n int, rng *rand.Rand) (bool, int) {
	switch {
	case s.pending != nil:
		if s.pendingStep == sc.stepNo {
			// Learn it in a later step: a store that fail-stopped meanwhile
			// shows what is durable only once it restarted.
			return false, -1
		}
		return sc.resolveStage(ctx, s, n), -1
	case s.requested && s.final == nil:
		return sc.doCommit(ctx, cl, s, sc.target(s, n, rng))
	case s.final != nil:
		if !s.replayed && rng.Float64() < 0.3 {
			// Any node replays a commit's answer.
			s.replayed = true
			return sc.doCommit(ctx, cl, s, n)
		}
		s.done = true
		return true, -1
	case len(s.landed) < s.stages && !s.conflicted:
		if rng.Float64() < 0.35 {
			return sc.sessionRead(ctx, s, sc.target(s, n, rng), rng)
		}
		return sc.stageNext(ctx, s, sc.target(s, n, rng), rng)
	}
	switch {
	case s.end == endAbandon:
		s.abandoned, s.done = true, true
		return true, -1
	case s.end == endAbort || len(s.landed) == 0 || (s.conflicted && rng.IntN(2) == 0):
		return sc.abortSession(ctx, s, sc.target(s, n, rng))
	}
	return sc.doCommit(ctx, cl, s, sc.target(s, n, rng))
}

// stageNext stages s's next step on node t.
func (sc *scenario) stageNext(ctx context.Context, s *sessionRun, t int, rng *rand.Rand) (bool, int) {
	j := len(s.landed)
	st := sessStage{incs: map[int]int{}, markers: sessMarkers(s.idx, j)}
	// A counter of table t (which the keyed batches increment too) or u's
	// (only sessions do), or both.
	switch r := rng.Float64(); {
	case r < 0.35:
		st.incs[rng.IntN(sc.cfg.Docs)] += 1 + rng.IntN(3)
	case r < 0.8:
		st.incs[sc.cfg.Docs+rng.IntN(sessCounters)] += 1 + rng.IntN(3)
	default:
		st.incs[rng.IntN(sc.cfg.Docs)] += 1 + rng.IntN(3)
		st.incs[sc.cfg.Docs+rng.IntN(sessCounters)] += 1 + rng.IntN(3)
	}
	byTable := map[string]*table.Batch{}
	batch := func(tbl string) *table.Batch {
		if byTable[tbl] == nil {
			byTable[tbl] = &table.Batch{}
		}
		return byTable[tbl]
	}
	for _, d := range slices.Sorted(maps.Keys(st.incs)) {
		tbl, id := sc.counterRef(d)
		b := batch(tbl)
		b.Transforms = append(b.Transforms, table.Transform{ID: id, Upsert: true,
			Ops: []table.Op{{Op: table.OpInc, Path: "n", Value: json.RawMessage(fmt.Sprint(st.incs[d]))}}})
	}
	for _, m := range st.markers {
		b := batch(m.table)
		b.Inserts = append(b.Inserts, table.Insert{ID: m.id, Doc: json.RawMessage(sessMarkerDoc(s.idx, j))})
	}
	var batches []receipt.TableBatch
	for _, tbl := range []string{tableName, sessTable} {
		if b := byTable[tbl]; b != nil {
			batches = append(batches, receipt.TableBatch{Table: tbl, Batch: b})
		}
	}
	res, info, err := sc.cl.nodes[t].svc.StageSession(ctx, principal, s.id, batches)
	sc.countOp("s-stage")
	sc.logSession(s, fmt.Sprintf("stage %d %v via node-%d", j, st.incs, t), err)
	if err == nil {
		s.landed = append(s.landed, st)
		if info.Stages != len(s.landed) {
			sc.violate(fmt.Sprintf("session s%d: %d stages staged, the session says %d", s.idx, len(s.landed), info.Stages))
		}
		inserted, transformed := 0, 0
		for _, r := range res {
			inserted += r.Inserted
			transformed += r.Transformed
		}
		if inserted != len(st.markers) || transformed != len(st.incs) {
			sc.violate(fmt.Sprintf("session s%d stage %d: %d inserted and %d transformed, staged %d and %d", s.idx, j, inserted, transformed, len(st.markers), len(st.incs)))
		}
		return true, -1
	}
	if crashed, definite := sc.sessionRefusal(s, t, err); definite {
		return crashed < 0, crashed
	}
	// Unknown whether it landed: SessionInfo tells, in a later step.
	s.pending, s.pendingStep = &st, sc.stepNo
	if errors.Is(err, fault.ErrInjected) {
		return false, t
	}
	return false, -1
}

// sessionRefusal handles an error that surely changed nothing in s (true),
// noting what it says: a conflict, or that the session ended.
func (sc *scenario) sessionRefusal(s *sessionRun, t int, err error) (int, bool) {
	var elsewhere *receipt.HeldElsewhereError
	switch {
	case errors.As(err, &elsewhere):
		if t == s.node && elsewhere.Holder.Node == sc.cl.nodes[t].id {
			sc.violate(fmt.Sprintf("session s%d: its owner %s says an older incarnation of itself holds it", s.idx, elsewhere.Holder.Node))
		}
		sc.countOp("s-held-elsewhere")
		return -1, true
	case isCode(err, code.TransactionConflict):
		s.conflicted = true
		sc.countOp("s-stage-conflict")
		return -1, true
	case isCode(err, code.SessionAborted):
		s.done = true
		return -1, true
	case isCode(err, code.SessionCommitted), isCode(err, code.SessionNotFound):
		sc.violate(fmt.Sprintf("session s%d (never committed, not cleaned): %v", s.idx, err))
		s.done = true
		return -1, true
	case isCode(err, code.Overloaded):
		return -1, true
	}
	return -1, false
}

// resolveStage learns from SessionInfo whether s's pending stage landed:
// steps are counted, so the session's count tells.
func (sc *scenario) resolveStage(ctx context.Context, s *sessionRun, n int) bool {
	info, err := sc.cl.nodes[n].svc.SessionInfo(ctx, principal, s.id)
	sc.countOp("s-info")
	sc.logSession(s, fmt.Sprintf("info via node-%d: %s %d stages", n, info.State, info.Stages), err)
	if err != nil {
		if s.infoTries++; s.infoTries >= sessInfoTries {
			s.abandoned, s.done = true, true // it is never committed: it must expire
		}
		return false
	}
	switch info.State {
	case receipt.SessionOpen:
		switch info.Stages {
		case len(s.landed) + 1:
			s.landed = append(s.landed, *s.pending)
		case len(s.landed):
		default:
			sc.violate(fmt.Sprintf("session s%d: %d stages staged (and one unknown), the session says %d", s.idx, len(s.landed), info.Stages))
			s.done = true
		}
		s.pending = nil
		return true
	case receipt.SessionAborted:
		s.pending, s.done = nil, true
		return true
	}
	sc.violate(fmt.Sprintf("session s%d is %s, never asked to commit", s.idx, info.State))
	s.done = true
	return false
}

// sessionRead reads, through s, a counter or one of its own markers, and
// checks that it sees its own writes over what it saw of the committed
// state: a counter reads as the value first seen plus its own increments.
func (sc *scenario) sessionRead(ctx context.Context, s *sessionRun, t int, rng *rand.Rand) (bool, int) {
	var (
		marker *markerRef
		doc    string
		d      = rng.IntN(sc.counters())
	)
	if len(s.landed) > 0 && rng.Float64() < 0.4 {
		j := rng.IntN(len(s.landed))
		m := s.landed[j].markers[rng.IntN(len(s.landed[j].markers))]
		marker, doc = &m, sessMarkerDoc(s.idx, j)
	}
	tbl, id := sc.counterRef(d)
	if marker != nil {
		tbl, id = marker.table, marker.id
	}
	raw, err := sc.cl.nodes[t].svc.ReadSession(ctx, principal, s.id, tbl, id)
	sc.countOp("s-read")
	sc.logSession(s, fmt.Sprintf("read %s/%s via node-%d: %s", tbl, id, t, raw), err)
	switch {
	case marker != nil && err == nil:
		if !sameJSON(raw, doc) {
			sc.violate(fmt.Sprintf("session s%d reads its marker %s/%s as %s, it inserted %s", s.idx, tbl, id, raw, doc))
		}
		return true, -1
	case marker != nil && isCode(err, code.DocumentNotFound):
		sc.violate(fmt.Sprintf("session s%d does not see its own marker %s/%s", s.idx, tbl, id))
		return true, -1
	case marker == nil && isCode(err, code.DocumentNotFound) && !absentReadsRecorded:
		return true, -1
	case marker == nil && (err == nil || isCode(err, code.DocumentNotFound)):
		value := 0
		if err == nil {
			var v struct{ N int }
			if json.Unmarshal(raw, &v) != nil {
				sc.violate(fmt.Sprintf("session s%d: counter %s/%s is not a counter: %s", s.idx, tbl, id, raw))
				return false, -1
			}
			value = v.N
		}
		own := s.incs()[d]
		seen := value - own
		if prev, ok := s.seen[d]; ok && prev != seen {
			sc.violate(fmt.Sprintf("session s%d reads %s/%s = %d with its own increments %d: it saw %d, earlier %d",
				s.idx, tbl, id, value, own, seen, prev))
		} else if seen < 0 {
			sc.violate(fmt.Sprintf("session s%d reads %s/%s = %d, less than its own increments %d", s.idx, tbl, id, value, own))
		}
		s.seen[d] = seen
		return true, -1
	}
	if crashed, definite := sc.sessionRefusal(s, t, err); definite {
		return crashed < 0, crashed
	}
	if errors.Is(err, fault.ErrInjected) {
		return false, t
	}
	return false, -1
}

func sameJSON(raw json.RawMessage, want string) bool {
	var a, b any
	return json.Unmarshal(raw, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && fmt.Sprint(a) == fmt.Sprint(b)
}

func (sc *scenario) abortSession(ctx context.Context, s *sessionRun, t int) (bool, int) {
	s.aborted, s.done = true, true // once it tries to abort, the client never commits
	info, err := sc.cl.nodes[t].svc.AbortSession(ctx, principal, s.id)
	sc.countOp("s-abort")
	sc.logSession(s, fmt.Sprintf("abort via node-%d", t), err)
	switch {
	case err == nil && info.State != receipt.SessionAborted:
		sc.violate(fmt.Sprintf("session s%d: abort answered state %s", s.idx, info.State))
	case err == nil:
	case errors.Is(err, fault.ErrInjected):
		return false, t
	default:
		sc.sessionRefusal(s, t, err)
	}
	return true, -1
}

// doCommit asks node t to commit s, with its key, and records the answer.
func (sc *scenario) doCommit(ctx context.Context, cl *client, s *sessionRun, t int) (bool, int) {
	out, err := sc.commit(ctx, cl, s, t)
	if errors.Is(err, fault.ErrInjected) {
		return false, t
	}
	return out.Class != outUnknown, -1
}

func (sc *scenario) commit(ctx context.Context, cl *client, s *sessionRun, t int) (opOutput, error) {
	in := s.commitInput()
	call := sc.rec.now()
	ans, err := sc.cl.nodes[t].svc.CommitSession(ctx, receipt.CommitRequest{Principal: principal, Session: s.id, Key: s.key})
	ret := sc.rec.now()
	if !s.requested {
		s.requested, s.firstCall = true, call
	}
	out := sc.commitOutput(s, ans, err)
	sc.rec.record(cl.id, in, call, out, ret)
	sc.countOp("s-commit")
	if out.Class == outUnknown {
		cl.id = sc.rec.newClient()
	} else if s.final == nil {
		s.final, s.finalRet = &out, ret
	}
	return out, err
}

// commitOutput classifies a commit's answer: terminal (a receipt's stored
// envelope, or session_aborted: the session ended before its commit was
// asked for, nothing applied) or unknown.
func (sc *scenario) commitOutput(s *sessionRun, ans receipt.Answer, err error) opOutput {
	switch {
	case err != nil:
	case ans.Terminal && ans.Outcome == receipt.OutcomeCommitted:
		if s.conflicted {
			sc.violate(fmt.Sprintf("session s%d committed after one of its reads was refused as a conflict", s.idx))
		}
		return opOutput{Class: outCommitted, Env: envString(ans.Envelope)}
	case ans.Terminal:
		return opOutput{Class: outNotApplied, Env: envString(ans.Envelope)}
	case ans.Code == code.SessionAborted:
		return opOutput{Class: outNotApplied, Env: envString(ans.Envelope)}
	case ans.Code == code.KeyMismatch, ans.Code == code.SessionNotFound, ans.Code == code.KeyExpired:
		// Expired: a commit is never asked again once its receipt was
		// cleaned (cleanSessions), so no tombstone may answer it.
		sc.violate(fmt.Sprintf("session s%d: commit answered %s: %s", s.idx, ans.Code, ans.Message))
	}
	return opOutput{Class: outUnknown}
}

// doMarkerRead reads, outside any session, a marker of one of the
// sessions begun so far (pick chooses which), and records what it saw.
func (sc *scenario) doMarkerRead(ctx context.Context, n *node, pick uint32) {
	sc.mu.Lock()
	count := len(sc.sessions)
	sc.mu.Unlock()
	if count == 0 {
		return
	}
	s, j := int(pick%uint32(count)), int(pick/64%sessStagesMax)
	refs := sessMarkers(s, j)
	ref := refs[int(pick/256)%len(refs)]
	call := sc.rec.now()
	_, err := n.svc.Tables().Get(ctx, principal, ref.table, ref.id)
	ret := sc.rec.now()
	if err != nil && !isCode(err, code.DocumentNotFound) {
		return
	}
	sc.mu.Lock()
	sc.markerReads = append(sc.markerReads, markerRead{sess: s, stage: j, ref: ref, present: err == nil, call: call, ret: ret})
	sc.mu.Unlock()
	sc.countOp("marker-reads")
}
