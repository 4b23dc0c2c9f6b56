package harness

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/anishathalye/porcupine"
)

// opKind is what a client did.
type opKind uint8

const (
	opBatch  opKind = iota + 1 // a keyed batch: $inc on Docs and a marker insert
	opRead                     // a read of one counter document
	opCommit                   // the commit of an interactive session (session.go)
)

// outClass is what a batch's answer says about its effect.
type outClass uint8

const (
	outUnknown    outClass = iota // no terminal answer: it may apply, now or later
	outCommitted                  // terminal committed
	outNotApplied                 // terminal aborted or not_applied
	// outExpired: 409 idempotency_key_expired, the key's tombstone refused
	// it. Not terminal (no answer of the key's to replay), but definite:
	// this request did not apply, and no request of its generation will
	// (every one is sent while the tombstone lasts: see tombs.go).
	outExpired
)

func (c outClass) String() string {
	return [...]string{"unknown", "committed", "not-applied", "expired"}[c]
}

// opInput is a porcupine operation's input.
type opInput struct {
	Kind opKind
	Key  int   // key index (batch); session index (commit)
	Gen  int   // the key's generation: bumped when its receipt is cleaned
	Docs []int // counters the batch increments (the commit touches), or the one read
	// Resend: the batch sent is the cleaned generation's (the same request
	// as the one its tombstone stands for), under the generation sent
	// while the tombstone lasts.
	Resend bool
	// A commit: Incs[i] is what it adds to Docs[i] (0: only read), Seen[i]
	// the value the session saw Docs[i] at (-1: not known). A commit
	// applies at a point where every counter it saw still holds that
	// value: it is conditioned on the versions seen.
	Incs []int
	Seen []int
}

// opOutput is a porcupine operation's output.
type opOutput struct {
	Class outClass
	Env   string // terminal envelope, rendered (batch)
	Value int    // counter read (read)
}

// recorder collects a history on one logical time base: every call and
// return takes the next tick, so real-time order is preserved exactly.
type recorder struct {
	tick    atomic.Int64
	clients atomic.Int64

	mu  sync.Mutex
	ops []porcupine.Operation
}

func (r *recorder) now() int64     { return r.tick.Add(1) }
func (r *recorder) newClient() int { return int(r.clients.Add(1) - 1) }

// record adds one operation. An operation with an unknown outcome returns
// at math.MaxInt64: it may take effect at any time after its call.
func (r *recorder) record(client int, in opInput, call int64, out opOutput, ret int64) {
	if out.Class == outUnknown && in.Kind != opRead {
		ret = math.MaxInt64
	}
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	r.mu.Unlock()
}

// settled is when the harness first saw a (key, generation)'s receipt
// terminal in the store, and with which class: its effect, if any, landed
// before that moment.
type settled struct {
	at      int64
	class   outClass
	env     string
	outcome string // the envelope's broad outcome: what a tombstone keeps
}

type keyGen struct{ key, gen int }

// observations is what the harness saw in the store between steps.
type observations struct {
	settled  map[keyGen]settled // first seen terminal
	sessions map[int]settled    // session commits first seen terminal, by session index
	// spent are the generations sent while their key's tombstone lasted:
	// none may ever apply.
	spent map[keyGen]bool
}

// effectHistory turns the recorded history into the one the document model
// checks: every attempt of a (key, generation) shares a single effect, so
// the attempts are replaced by one operation that stands for that effect,
// over the one interval the run proves it lies in —
//
//   - from the first attempt's call (nothing executes before it),
//   - to the earliest of: the return of the first terminal answer, and the
//     moment the harness first saw the receipt terminal (an answer is only
//     given, and a receipt only becomes terminal, once the effect is settled).
//
// Its class is the key's terminal class; a key whose answers say "not
// applied" contributes no effect at all, nor does a generation sent only
// while its key's tombstone lasted (spent: it must never apply) or one an
// attempt of which was answered expired (only spent ones are); one never
// settled stays unknown (it may apply at any time after its first call).
// Reads are kept as they are. The per-attempt answers are checked separately (keyModel).
//
// A session's commits (every retry of one session's commit) are one effect
// in the same way, over the same interval, the receipt of its commit key
// standing for the key's; a session whose commit was never asked for has
// no effect in the history at all — if anything it staged ever shows, a
// read disagrees with the model.
//
// With one operation per key instead of one per attempt, the checker's
// search no longer grows with the retries of slow keys.
func effectHistory(h []porcupine.Operation, obs observations) []porcupine.Operation {
	type effect struct {
		call, ret int64
		class     outClass
		in        opInput
		refused   bool // an attempt was answered expired
	}
	// Keyed batches by (key, generation), commits by session: the two never
	// share an effect.
	type effectKey struct {
		kind     opKind
		key, gen int
	}
	effects := map[effectKey]*effect{}
	var order []effectKey
	var out []porcupine.Operation
	for _, op := range h {
		in, o := op.Input.(opInput), op.Output.(opOutput)
		if in.Kind == opRead {
			out = append(out, op)
			continue
		}
		ek := effectKey{in.Kind, in.Key, in.Gen}
		e := effects[ek]
		if e == nil {
			e = &effect{call: op.Call, ret: math.MaxInt64, class: outUnknown, in: in}
			effects[ek] = e
			order = append(order, ek)
		}
		e.call = min(e.call, op.Call)
		e.refused = e.refused || o.Class == outExpired
		if o.Class != outUnknown && o.Env != "" && op.Return < e.ret {
			e.ret, e.class = op.Return, o.Class
		}
	}
	for _, ek := range order {
		e := effects[ek]
		s, ok := obs.settled[keyGen{ek.key, ek.gen}]
		if ek.kind == opCommit {
			s, ok = obs.sessions[ek.key]
		}
		if ok && s.at < e.ret {
			e.ret, e.class = s.at, s.class
		}
		if e.class == outNotApplied || e.refused || (ek.kind == opBatch && obs.spent[keyGen{ek.key, ek.gen}]) {
			continue
		}
		op := porcupine.Operation{ClientId: len(out) + 1<<20, Call: e.call, Return: max(e.ret, e.call),
			Input: e.in, Output: opOutput{Class: e.class}}
		out = append(out, op)
	}
	return out
}

func (r *recorder) history() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Operation(nil), r.ops...)
}
