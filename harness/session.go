package harness

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/receipt"
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
