// Package harness drives Idem through seeded fault schedules — crashes at
// catalog failpoints, lease expiry, paused zombies, transient and ambiguous
// store errors, bare decision conflicts — records every client operation as
// a porcupine history, and checks it for linearizability against models of
// exactly-once keyed batches and document reads, then checks the store's
// invariants once the system is stable.
package harness

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/receipt"
)

// Errors a nodeStore injects.
var (
	// ErrNodeDown: the node crashed; nothing of this call was written.
	ErrNodeDown = errors.New("harness: node is down")
	// ErrTransient: an injected store failure; nothing was written.
	ErrTransient = errors.New("harness: transient store error")
)

// storeFaults are the store-level faults a step can switch on for one node.
type storeFaults struct {
	transient      float64 // probability an Apply fails with ErrTransient
	ambiguousNew   float64 // probability a receipt-creating Apply returns ErrAmbiguous
	bareConflict   float64 // probability a decision Apply returns a bare decision conflict
	ambiguousWrote bool    // whether an ambiguous Apply is applied first
}

// nodeStore is one node incarnation's view of the shared store: it can be
// killed (every later call fails, as if the process were gone), paused (calls
// block until resumed: a zombie), and made to fail in the ways above. It
// also watches every receipt deletion for the "no receipt with debt is
// cleaned" invariant.
type nodeStore struct {
	inner engine.Store
	obs   *observer

	dead atomic.Bool

	mu     sync.Mutex
	gate   chan struct{} // non-nil while paused
	faults storeFaults
	rng    *rand.Rand
}

func newNodeStore(inner engine.Store, obs *observer, seed uint64) *nodeStore {
	return &nodeStore{inner: inner, obs: obs, rng: rand.New(rand.NewPCG(seed, 0x1de))}
}

func (s *nodeStore) kill() { s.dead.Store(true); s.resume() }

func (s *nodeStore) pause() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate == nil {
		s.gate = make(chan struct{})
	}
}

func (s *nodeStore) resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
}

func (s *nodeStore) setFaults(f storeFaults) {
	s.mu.Lock()
	s.faults = f
	s.mu.Unlock()
}

// enter waits while paused and fails once dead.
func (s *nodeStore) enter(ctx context.Context) error {
	for {
		if s.dead.Load() {
			return ErrNodeDown
		}
		s.mu.Lock()
		gate := s.gate
		s.mu.Unlock()
		if gate == nil {
			return nil
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// roll draws a fault decision.
func (s *nodeStore) roll(p float64) bool {
	if p <= 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.Float64() < p
}

func (s *nodeStore) Get(ctx context.Context, key []byte) (engine.Item, error) {
	if err := s.enter(ctx); err != nil {
		return engine.Item{}, err
	}
	return s.inner.Get(ctx, key)
}

func (s *nodeStore) Scan(ctx context.Context, start, end []byte, limit int) ([]engine.Item, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	return s.inner.Scan(ctx, start, end, limit)
}

func (s *nodeStore) Apply(ctx context.Context, b *engine.Batch) (engine.Version, error) {
	var v engine.Version
	err := s.write(ctx, []*engine.Batch{b}, func() (err error) {
		v, err = s.inner.Apply(ctx, b)
		return err
	})
	return v, err
}

// chainStore is a nodeStore whose store can chain writes (engine.Chainer),
// so that the receipt layer takes its default chained path; a chain meets
// the same faults as an Apply, and like a failed condition of the engine's
// they leave nothing written.
type chainStore struct{ *nodeStore }

func (s chainStore) ApplyChain(ctx context.Context, links ...*engine.Batch) ([]engine.Version, error) {
	var vs []engine.Version
	err := s.write(ctx, links, func() (err error) {
		vs, err = s.inner.(engine.Chainer).ApplyChain(ctx, links...)
		return err
	})
	return vs, err
}

// write makes one write of batches (an Apply, or a chain's links) through
// apply, unless an armed fault answers for it: a transient error or a bare
// decision conflict (nothing written), or an ambiguous receipt creation
// (written first or not, as the faults say).
func (s *nodeStore) write(ctx context.Context, batches []*engine.Batch, apply func() error) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	f := s.faults
	s.mu.Unlock()
	if s.roll(f.transient) {
		return ErrTransient
	}
	for _, b := range batches {
		if key, ok := condOn(b, engine.MustBeAbsent, decisionPrefix); ok && s.roll(f.bareConflict) {
			// "Someone else decided" — with no decision anyone can read.
			return &engine.ConditionError{Cond: engine.Condition{Key: key, Kind: engine.MustBeAbsent}}
		}
	}
	write := func() error {
		for _, b := range batches {
			s.obs.checkDeletes(ctx, s.inner, b)
		}
		return apply()
	}
	if _, ok := condOn(batches[0], engine.MustBeAbsent, []byte(engine.NSReceipt)); ok && s.roll(f.ambiguousNew) {
		if f.ambiguousWrote {
			if err := write(); err != nil {
				return err
			}
		}
		return engine.ErrAmbiguous
	}
	return write()
}

var decisionPrefix = engine.NSTxn.Prefix("dec")

func condOn(b *engine.Batch, kind engine.CondKind, prefix []byte) ([]byte, bool) {
	for _, c := range b.Conds {
		if c.Kind == kind && bytes.HasPrefix(c.Key, prefix) {
			return c.Key, true
		}
	}
	return nil, false
}

// observer records invariant violations seen while the system runs.
type observer struct {
	mu         sync.Mutex
	violations []string
}

func (o *observer) violate(msg string) {
	o.mu.Lock()
	o.violations = append(o.violations, msg)
	o.mu.Unlock()
}

func (o *observer) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.violations...)
}

// checkDeletes flags a batch that would delete a receipt that still has
// debt (not terminal, or terminal with unresolved intents), judged on the
// version the batch's own condition names — the one it would delete.
func (o *observer) checkDeletes(ctx context.Context, store engine.Store, b *engine.Batch) {
	for _, op := range b.Ops {
		if !op.Delete || !engine.NSReceipt.Has(op.Key) {
			continue
		}
		var want engine.Version
		for _, c := range b.Conds {
			if c.Kind == engine.MustBeAtVersion && bytes.Equal(c.Key, op.Key) {
				want = c.Version
			}
		}
		it, err := store.Get(ctx, op.Key)
		if err != nil || (want != 0 && it.Version != want) {
			continue // the delete will fail its condition, or there is nothing
		}
		rec, err := receipt.DecodeRecord(it.Value)
		if err != nil {
			o.violate("undecodable receipt deleted: " + string(op.Key))
			continue
		}
		if rec.State != receipt.Terminal || rec.Debt != 0 {
			o.violate("receipt with debt deleted: " + string(op.Key) + " state " + rec.State.String())
		}
	}
}
