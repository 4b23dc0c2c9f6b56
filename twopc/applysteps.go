package twopc

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/idemdb/idem/store"
)

// One applier for the durable steps of a plan (issue 36, part 3): each
// caller stages what a step writes as a *store.Batch first — Begin's write
// (stageBegin), the decision (stageDecision), a chain's links (stageChain),
// the one write of CommitOnce (stageOnce), the receipt layer's publishes —
// and hands the steps to ApplySteps, which alone decides how the store
// makes them durable. The receipt layer's plan (receipt/writeplan.go
// planOf) names its steps with the names below, so a test can hold what
// was applied to what was planned (receipt/writeplan_record_test.go).

// Step is one durable write of a plan.
type Step struct {
	// Name is the plan's name of the step (StepBegin…, or the caller's).
	Name  string
	Batch *store.Batch
	// Linked: sequenced right after the step before it and never durable
	// without it — the next link of that step's chain (store.Chainer).
	Linked bool
	// Chain: the step is a chain's first link, made by ApplyChain on a
	// store that chains even when no link follows it (BeginCommit's
	// direct chain of one link), as a store's chains see it today.
	Chain bool
}

// The names of the steps this package writes.
const (
	StepBegin      = "begin"
	StepDecide     = "decide"
	StepBeginLink  = "begin link"
	StepDecideLink = "decide link"
	StepOnce       = "commit once"
)

// ApplySteps makes steps durable in order, by the store's capabilities: a
// step with the linked steps after it (or a Chain step alone) is one
// store.Chainer.ApplyChain (one wait) when the store chains, and otherwise
// every step is one Apply, made once the one before it returned — which
// keeps a linked step's promise, since each Apply is durable before the
// next starts.
//
// It returns the versions of the steps written, in order. On error, the
// first len(versions) steps were written and err is the store's own error
// for the step (or the chain) in flight, unchanged: a *store.ConditionError
// for a failed condition (a chain's writes nothing), store.ErrAmbiguous
// for an outcome unknown (a chain's covers every link of it). Every batch
// is first checked never to change a decided record (checkDecisionWrites).
func ApplySteps(ctx context.Context, st store.Store, steps []Step) ([]store.Version, error) {
	return applySteps(ctx, st, steps, make([]store.Version, 0, len(steps)))
}

// ApplyStep is ApplySteps of the one step s, returning its version.
func ApplyStep(ctx context.Context, st store.Store, s Step) (store.Version, error) {
	var one [1]store.Version // the hot path's writes, without an allocation
	vs, err := applySteps(ctx, st, []Step{s}, one[:0])
	if err != nil {
		return 0, err
	}
	return vs[0], nil
}

// applySteps is ApplySteps appending the versions to vs.
func applySteps(ctx context.Context, st store.Store, steps []Step, vs []store.Version) ([]store.Version, error) {
	if observed.Load() {
		if fn, ok := ctx.Value(observerKey{}).(func([]Step)); ok {
			fn(slices.Clone(steps)) // a copy: steps stays the caller's, and off the heap
		}
	}
	for _, s := range steps {
		checkDecisionWrites(s.Batch)
	}
	chainer := st.Capabilities().Chain
	for i := 0; i < len(steps); {
		n := 1
		for chainer != nil && i+n < len(steps) && steps[i+n].Linked {
			n++
		}
		if n == 1 && (chainer == nil || !steps[i].Chain) {
			v, err := st.Apply(ctx, steps[i].Batch)
			if err != nil {
				return vs, err
			}
			vs, i = append(vs, v), i+1
			continue
		}
		links := make([]*store.Batch, n)
		for j := range links {
			links[j] = steps[i+j].Batch
		}
		cvs, err := chainer.ApplyChain(ctx, links...)
		if err != nil {
			return vs, err
		}
		vs, i = append(vs, cvs...), i+n
	}
	return vs, nil
}

// applyStep applies the one step name writing b.
func (c *Coordinator) applyStep(ctx context.Context, name string, b *store.Batch) (store.Version, error) {
	return ApplyStep(ctx, c.store, Step{Name: name, Batch: b})
}

// ObserveSteps returns ctx under which ApplySteps hands fn every plan it
// receives, before it writes any of it: how a test sees which steps a
// request's writes went through, and under which names.
func ObserveSteps(ctx context.Context, fn func([]Step)) context.Context {
	observed.Store(true)
	return context.WithValue(ctx, observerKey{}, fn)
}

type observerKey struct{}

// observed is set once any ObserveSteps ran: until then a plan looks up no
// observer. Over HTTP that lookup walked net/http's chain of contexts on
// every request, and made the request's context arm its deadline, for a
// hook only tests install (docs/benchmarks.md, "What the gap is made of").
var observed atomic.Bool
