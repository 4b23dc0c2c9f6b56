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
	opBatch opKind = iota + 1 // a keyed batch: $inc on Docs and a marker insert
	opRead                    // a read of one counter document
)

// outClass is what a batch's answer says about its effect.
type outClass uint8

const (
	outUnknown    outClass = iota // no terminal answer: it may apply, now or later
	outCommitted                  // terminal committed
	outNotApplied                 // terminal aborted or not_applied
)

// opInput is a porcupine operation's input.
type opInput struct {
	Kind opKind
	Key  int   // key index (batch)
	Gen  int   // the key's generation: bumped when its receipt is cleaned
	Docs []int // counters the batch increments, or the one read
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
	var meta any
	if out.Class == outUnknown && in.Kind == opBatch {
		meta, ret = ret, math.MaxInt64 // keep when the call came back, for clipUnknowns
	}
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret, Metadata: meta})
	r.mu.Unlock()
}

// settled is when the harness first saw a (key, generation)'s receipt
// terminal in the store, and with which class: its effect, if any, landed
// before that moment.
type settled struct {
	at    int64
	class outClass
	env   string
}

type keyGen struct{ key, gen int }

// observations is what the harness saw in the store between steps.
type observations struct {
	settled map[keyGen]settled // first seen terminal
	absent  map[keyGen]int64   // last seen without any receipt
}

// clipUnknowns narrows batches with unknown outcomes using what the run
// proves about their (key, generation): all attempts of one key share one
// effect, which lands (if at all) before the first terminal answer for the
// key returns and before the harness first saw its receipt terminal.
//
//   - a terminal answer returned before the attempt was called: the attempt
//     changed nothing; it reads as that answer (a no-op replay);
//   - otherwise its return is clipped to the earliest such bound after its
//     call, and it takes that bound's class: "not applied" never applies;
//     "committed" applies if not yet applied — whichever attempt's interval
//     holds the effect, every attempt's clipped interval ends after it, so a
//     linearization exists exactly when one did before.
//
// Without this, each unknown attempt stays concurrent with the rest of the
// history and the checker's search grows exponentially.
//
// And an attempt that had returned when the harness last saw no receipt at
// all for its (key, generation) had no effect and never will: nothing
// executes without a receipt, and only the cleaner deletes receipts (which
// starts a new generation).
func clipUnknowns(h []porcupine.Operation, obs observations) []porcupine.Operation {
	terminal := map[keyGen][]porcupine.Operation{}
	for _, op := range h {
		in, out := op.Input.(opInput), op.Output.(opOutput)
		if in.Kind == opBatch && out.Class != outUnknown {
			terminal[keyGen{in.Key, in.Gen}] = append(terminal[keyGen{in.Key, in.Gen}], op)
		}
	}
	out := make([]porcupine.Operation, len(h))
	for i, op := range h {
		out[i] = op
		in, o := op.Input.(opInput), op.Output.(opOutput)
		if in.Kind != opBatch || o.Class != outUnknown {
			continue
		}
		kg := keyGen{in.Key, in.Gen}
		if x, ok := obs.absent[kg]; ok && x > op.Metadata.(int64) {
			out[i].Output = opOutput{Class: outNotApplied} // no Env: not an answer to compare
			out[i].Return = op.Metadata.(int64)
			continue
		}
		var before *porcupine.Operation
		after, afterOut := int64(math.MaxInt64), opOutput{}
		for j := range terminal[kg] {
			t := &terminal[kg][j]
			switch {
			case t.Return < op.Call:
				if before == nil || t.Return < before.Return {
					before = t
				}
			case t.Return < after:
				after, afterOut = t.Return, t.Output.(opOutput)
			}
		}
		if s, ok := obs.settled[kg]; ok && s.at > op.Call && s.at < after {
			after, afterOut = s.at, opOutput{Class: s.class, Env: s.env}
		}
		switch {
		case before != nil:
			out[i].Output = before.Output
			out[i].Return = op.Metadata.(int64)
		case after != math.MaxInt64:
			out[i].Output = afterOut
			out[i].Return = after
		}
	}
	return out
}

func (r *recorder) history() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Operation(nil), r.ops...)
}
