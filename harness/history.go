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
	if out.Class == outUnknown && in.Kind == opBatch {
		ret = math.MaxInt64
	}
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	r.mu.Unlock()
}

func (r *recorder) history() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Operation(nil), r.ops...)
}
