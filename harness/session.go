package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/table"
)

// Interactive sessions in the workload (receipt/session*.go). Session
// clients run alongside the keyed ones: each step, a session client plays
// one leg of its current session — begin, stage 1–3 steps ($inc on
// counters of table t and of table u, and markers inserted in both), read
// its own writes, then commit (retried with the same key, leg after leg,
// until an answer is terminal), abort, or abandon it — and pauses between
// actions, so that a session lives across steps and the step's fault meets
// it open: a restart or crash kills its owner mid-session (it must be
// presumed aborted), `expire` and the choreographies' waits outlive its TTL
// (it must expire), and the keyed batches and the other sessions change the
// counters it read (its commit must abort with transaction_conflict).
//
// A session is modelled by what its client knows landed: the stages
// StageSession accepted (a stage whose outcome is unknown is resolved from
// SessionInfo's stage count in a later leg; until then the session is
// never committed), the value of each counter it saw (from its reads: a
// read returns what it saw plus its own increments), and the answers to
// its commit. Its commit is an operation of the history like a keyed
// batch (opCommit): the docs model applies its increments at most once,
// where every counter it saw still has the value seen; the keys model
// holds every terminal answer to the first. A session whose commit was
// never asked for has no operation at all: nothing it staged may ever be
// seen. The checks that need the final state (markers all or nothing
// across both tables, counters, readers outside the session) are in
// checkSessions.

const (
	sessTable    = "u" // the second table sessions write to
	sessCounters = 2   // table u's counters uc0, uc1: document indexes Config.Docs, Docs+1

	sessTTLMin    = 4 * time.Second
	sessTTLSpan   = 28 * time.Second // TTLs are drawn in [sessTTLMin, sessTTLMin+sessTTLSpan)
	sessStagesMax = 3
	legActionsMax = 6
	legPause      = 0.2 // probability of pausing the session until the next step after an action
	// sessInfoTries bounds the legs that try to learn whether a stage
	// landed; then the client abandons the session (it must expire).
	sessInfoTries = 3
)

// absentReadsRecorded says that a session's read of a document that does
// not exist records what it saw (the absence), as a read of one that exists
// records its version: such reads are held to the rest (repeatable, and
// the value 0 in the docs model). It was false while the receipt layer
// dropped a not-found read with the step's error — the harness found that
// bug (seeds 19, 31, 34, 37, 56, 92, 95) — and stays as the switch that
// shows it.
const absentReadsRecorded = true

// markerRef is a session marker: a document a stage inserts.
type markerRef struct{ table, id string }

// sessMarkers are the markers stage j of session s inserts: stage 0 one in
// table t (and, for even sessions, one in table u in the same step — its
// commit must apply both or neither), later stages one in u or t in turn.
func sessMarkers(s, j int) []markerRef {
	id := fmt.Sprintf("s-%d-%d", s, j)
	switch {
	case j == 0 && s%2 == 0:
		return []markerRef{{tableName, id}, {sessTable, id}}
	case j == 0 || j%2 == 0:
		return []markerRef{{tableName, id}}
	}
	return []markerRef{{sessTable, id}}
}

func sessMarkerDoc(s, j int) string { return fmt.Sprintf(`{"sess":%d,"stage":%d}`, s, j) }

// counterRef names counter d: c0..cD-1 in table t, then table u's.
func (sc *scenario) counterRef(d int) (string, string) {
	if d >= sc.cfg.Docs {
		return sessTable, fmt.Sprintf("uc%d", d-sc.cfg.Docs)
	}
	return tableName, counterID(d)
}

// counters is how many counters there are, in both tables.
func (sc *scenario) counters() int { return sc.cfg.Docs + sessCounters }

// sessEnd is how a session's client means to end it.
type sessEnd uint8

const (
	endCommit sessEnd = iota
	endAbort
	endAbandon // never committed nor aborted: it must expire
)

// sessStage is one staged step: what it adds to each counter, and the
// markers it inserts.
type sessStage struct {
	incs    map[int]int
	markers []markerRef
}

// sessionRun is one session as its client knows it. Only its client's
// actor touches it during a step; the harness reads and updates it
// between steps.
type sessionRun struct {
	idx    int
	id     string
	node   int    // the node that began it (its owner)
	key    string // its commit's Idempotency-Key as sent ("": the session ID)
	txn    string // its commit's receipt
	stages int    // planned
	end    sessEnd

	landed      []sessStage
	pending     *sessStage // staged with an unknown outcome
	pendingStep int        // the step it was sent in
	infoTries   int
	seen        map[int]int // counter -> the value the session saw it at
	conflicted  bool        // a stage or read was refused with transaction_conflict

	requested bool  // its commit was asked for
	firstCall int64 // when first
	final     *opOutput
	finalRet  int64
	replayed  bool
	done      bool // its client is finished with it
	aborted   bool // its client aborted it (or tried to)
	abandoned bool
	cleaned   bool // its record or its commit's receipt was cleaned: no more retries

	receiptSeen bool   // its commit's receipt was seen in the store
	reason      string // how it ended, as its record said (once seen ended)
	ended       receipt.SessionState
}

// incs sums what the landed stages add to each counter.
func (s *sessionRun) incs() map[int]int {
	out := map[int]int{}
	for _, st := range s.landed {
		for d, n := range st.incs {
			out[d] += n
		}
	}
	return out
}

// commitInput is the operation input of s's commit: every counter it
// touched, what it adds to each, and what it saw each at.
func (s *sessionRun) commitInput() opInput {
	incs := s.incs()
	docs := slices.Sorted(maps.Keys(incs))
	for d := range s.seen {
		if _, ok := incs[d]; !ok {
			docs = append(docs, d)
		}
	}
	slices.Sort(docs)
	in := opInput{Kind: opCommit, Key: s.idx}
	for _, d := range docs {
		seen, ok := s.seen[d]
		if !ok {
			seen = -1
		}
		in.Docs, in.Incs, in.Seen = append(in.Docs, d), append(in.Incs, incs[d]), append(in.Seen, seen)
	}
	return in
}

// markerRead is a read of a session marker from outside any session.
type markerRead struct {
	sess, stage int
	ref         markerRef
	present     bool
	call, ret   int64
}

// sessionCall runs fn, a session call to node t. (It is the one place
// every session call passes: a hook for what all of them need.)
func (sc *scenario) sessionCall(_ context.Context, _ int, fn func() error) error { return fn() }

// logSession adds one session call and what it answered to the run's
// session log (Result.History, after the operations).
func (sc *scenario) logSession(s *sessionRun, what string, err error) {
	line := fmt.Sprintf("%d sess s%d %s", sc.rec.now(), s.idx, what)
	var ce *code.Error
	var elsewhere *receipt.HeldElsewhereError
	switch {
	case err == nil:
		line += " -> ok"
	case errors.As(err, &ce):
		line += " -> " + string(ce.Code)
	case errors.As(err, &elsewhere):
		line += " -> held by " + elsewhere.Holder.String()
	default:
		line += " -> " + err.Error()
	}
	sc.mu.Lock()
	sc.sessLog = append(sc.sessLog, line)
	sc.mu.Unlock()
}

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
	var (
		res  []table.Result
		info receipt.Session
	)
	err := sc.sessionCall(ctx, t, func() (err error) {
		res, info, err = sc.cl.nodes[t].svc.StageSession(ctx, principal, s.id, batches)
		return err
	})
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
	var raw json.RawMessage
	err := sc.sessionCall(ctx, t, func() (err error) {
		raw, err = sc.cl.nodes[t].svc.ReadSession(ctx, principal, s.id, tbl, id)
		return err
	})
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
	var info receipt.Session
	err := sc.sessionCall(ctx, t, func() (err error) {
		info, err = sc.cl.nodes[t].svc.AbortSession(ctx, principal, s.id)
		return err
	})
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
	var ans receipt.Answer
	err := sc.sessionCall(ctx, t, func() (err error) {
		ans, err = sc.cl.nodes[t].svc.CommitSession(ctx, receipt.CommitRequest{Principal: principal, Session: s.id, Key: s.key})
		return err
	})
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
	case ans.Code == code.KeyMismatch, ans.Code == code.SessionNotFound:
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

// observeSessions records, between steps, when each asked-for commit's
// receipt is first seen terminal (see effectHistory), and how sessions
// ended, from their records.
func (sc *scenario) observeSessions() {
	ctx := context.Background()
	for _, s := range sc.sessions {
		if s.requested {
			if _, done := sc.obs.sessions[s.idx]; !done {
				if it, err := sc.cl.db.Get(ctx, engine.NSReceipt.Key(s.txn)); err == nil {
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
	it, err := sc.cl.db.Get(ctx, engine.NSSession.Key("rec", s.id))
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
		_, errRec := sc.cl.db.Get(ctx, engine.NSSession.Key("rec", s.id))
		_, errRcpt := sc.cl.db.Get(ctx, engine.NSReceipt.Key(s.txn))
		if errors.Is(errRec, engine.ErrNotFound) || (s.receiptSeen && errors.Is(errRcpt, engine.ErrNotFound)) {
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
