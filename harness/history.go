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

// clipUnknowns narrows batches with unknown outcomes using what the history
// proves about their (key, generation): all attempts of one key share one
// effect, and a terminal answer is only given once that effect is settled.
//
//   - a terminal answer that returned before the attempt was called: the
//     attempt changed nothing (its effect was settled before it began);
//   - otherwise, if the key's terminal answers say not applied: the attempt
//     never applied;
//   - otherwise its effect, if it was the one, took place before the first
//     terminal answer returned after its call: that bounds its return.
//
// Without this, each unknown attempt stays concurrent with the rest of the
// history and the checker's search grows with 2^unknowns.
func clipUnknowns(h []porcupine.Operation) []porcupine.Operation {
	type kg struct{ key, gen int }
	terminal := map[kg][]porcupine.Operation{}
	for _, op := range h {
		in, out := op.Input.(opInput), op.Output.(opOutput)
		if in.Kind == opBatch && out.Class != outUnknown {
			terminal[kg{in.Key, in.Gen}] = append(terminal[kg{in.Key, in.Gen}], op)
		}
	}
	out := make([]porcupine.Operation, len(h))
	for i, op := range h {
		out[i] = op
		in, o := op.Input.(opInput), op.Output.(opOutput)
		ts := terminal[kg{in.Key, in.Gen}]
		if in.Kind != opBatch || o.Class != outUnknown || len(ts) == 0 {
			continue
		}
		ret := op.Metadata.(int64)
		clip := int64(math.MaxInt64)
		for _, t := range ts {
			switch {
			case t.Return < op.Call:
				// Settled before this attempt: a no-op replay of that answer.
				out[i].Output = opOutput{Class: t.Output.(opOutput).Class, Env: t.Output.(opOutput).Env}
				out[i].Return = ret
				clip = -1
			case t.Return < clip && clip >= 0:
				clip = t.Return
			}
			if clip < 0 {
				break
			}
		}
		switch {
		case clip < 0:
		case ts[0].Output.(opOutput).Class == outNotApplied:
			out[i].Output = opOutput{Class: outNotApplied, Env: ts[0].Output.(opOutput).Env}
			out[i].Return = max(ret, op.Call)
		default:
			out[i].Return = clip
		}
	}
	return out
}

func (r *recorder) history() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Operation(nil), r.ops...)
}
