// Package harness drives Idem through seeded fault schedules — crashes at
// catalog failpoints, lease expiry, paused zombies that come back to write,
// transient and ambiguous store errors, bare decision conflicts, damaged
// checkpoints and value-log records — records every client operation as a
// porcupine history, and checks it for linearizability against models of
// exactly-once keyed batches, interactive sessions' commits (session.go) and document reads,
// audits every write a stale owner lands, and checks the store's
// invariants once the system is stable. A scenario runs
// in a testing/synctest bubble under one scheduler (sim.go), so a seed
// replays its run.
package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// Errors a nodeStore injects.
var (
	// errNodeDown: the node crashed; nothing of this call was written.
	errNodeDown = errors.New("harness: node is down")
	// errTransient: an injected store failure; nothing was written.
	errTransient = errors.New("harness: transient store error")
)

// storeFaults are the store-level faults a step can switch on for one node.
type storeFaults struct {
	transient      float64 // probability an Apply fails with errTransient
	ambiguousNew   float64 // probability a receipt-creating Apply returns ErrAmbiguous
	bareConflict   float64 // probability a decision Apply returns a bare decision conflict
	ambiguousWrote bool    // whether an ambiguous Apply is applied first
	refuseChains   bool    // chains, and receipts created terminal in the write that commits them, fail as a failed condition would (nothing written): writes go one by one
}

// trigger pauses a node at the first write it matches: the zombie
// choreographies (zombie.go) stop a node exactly before the write they want
// it to attempt late. A failing trigger instead fails every write it
// matches (nothing written) until it is disarmed.
type trigger struct {
	name  string
	match func(batches []*store.Batch) bool
	fail  bool
	fired atomic.Bool
}

// nodeStore is one node incarnation's view of the shared store: every call
// waits at the scheduler's gate; it can be killed (every later call fails,
// as if the process were gone), paused (calls wait until resumed: a zombie,
// its calls in flight served only after it wakes), paused at a write that
// a trigger matches, and made to fail in the ways of storeFaults. Every
// write is audited (audit.go).
type nodeStore struct {
	inner store.Store
	sim   *sim
	audit *auditor
	node  string

	dead   chan struct{} // closed by kill
	killed atomic.Bool

	mu      sync.Mutex
	owner   lease.Owner   // set once the incarnation is registered
	pause   chan struct{} // non-nil while paused
	trigger *trigger
	faults  storeFaults
	rng     *rand.Rand
}

func newNodeStore(inner store.Store, s *sim, a *auditor, node string, seed uint64) *nodeStore {
	return &nodeStore{inner: inner, sim: s, audit: a, node: node, dead: make(chan struct{}),
		rng: rand.New(rand.NewPCG(seed, 0x1de))}
}

func (s *nodeStore) kill() {
	if s.killed.CompareAndSwap(false, true) {
		close(s.dead)
	}
	s.resume()
}

func (s *nodeStore) setOwner(o lease.Owner) {
	s.mu.Lock()
	s.owner = o
	s.mu.Unlock()
}

func (s *nodeStore) pauseNow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pause == nil {
		s.pause = make(chan struct{})
	}
}

func (s *nodeStore) resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pause != nil {
		close(s.pause)
		s.pause = nil
	}
}

func (s *nodeStore) paused() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pause
}

func (s *nodeStore) setFaults(f storeFaults) {
	s.mu.Lock()
	s.faults = f
	s.mu.Unlock()
}

// arm sets the trigger that pauses this node at the first write it matches.
func (s *nodeStore) arm(t *trigger) {
	s.mu.Lock()
	s.trigger = t
	s.mu.Unlock()
}

// takeTrigger returns the armed trigger if batches match it, disarming it.
func (s *nodeStore) takeTrigger(batches []*store.Batch) *trigger {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.trigger
	if t == nil || !t.match(batches) {
		return nil
	}
	if !t.fail {
		s.trigger = nil
	}
	return t
}

// enter waits while paused, then at the gate; it fails once dead. A call
// the node was paused under while it waited at the gate waits again: a
// paused process does not run.
func (s *nodeStore) enter(ctx context.Context, label string) error {
	for {
		if s.killed.Load() {
			return errNodeDown
		}
		if p := s.paused(); p != nil {
			select {
			case <-p:
			case <-s.dead:
				return errNodeDown
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		if err := s.sim.gate(ctx, label, s.dead); err != nil {
			return err
		}
		if s.killed.Load() {
			return errNodeDown
		}
		if s.paused() == nil {
			return nil
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

// label names a call at the gate: node, actor, operation and the keys it
// touches, so that the scheduler's order does not depend on the order in
// which goroutines arrived.
func (s *nodeStore) label(ctx context.Context, op string, keys ...[]byte) string {
	h := fnv.New64a()
	for _, k := range keys {
		h.Write(k)
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%s/%s/%s/%x", s.node, actorOf(ctx), op, h.Sum64())
}

func batchKeys(batches []*store.Batch) [][]byte {
	var keys [][]byte
	for _, b := range batches {
		for _, c := range b.Conds {
			keys = append(keys, c.Key)
		}
		for _, o := range b.Ops {
			keys = append(keys, o.Key)
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	return keys
}

func (s *nodeStore) Get(ctx context.Context, key []byte) (store.Item, error) {
	if err := s.enter(ctx, s.label(ctx, "get", key)); err != nil {
		return store.Item{}, err
	}
	return s.inner.Get(ctx, key)
}

// Limits implements store.Store: the inner store's.
func (s *nodeStore) Limits() store.Limits { return s.inner.Limits() }

// Capabilities implements store.Store: none, so that every write meets the
// gate and the faults one batch at a time (chainStore adds chains).
func (s *nodeStore) Capabilities() store.Capabilities { return store.Capabilities{} }

func (s *nodeStore) Scan(ctx context.Context, start, end []byte, limit int) ([]store.Item, error) {
	if err := s.enter(ctx, s.label(ctx, fmt.Sprint("scan", limit), start, end)); err != nil {
		return nil, err
	}
	return s.inner.Scan(ctx, start, end, limit)
}

func (s *nodeStore) Apply(ctx context.Context, b *store.Batch) (store.Version, error) {
	s.mu.Lock()
	refuse := s.faults.refuseChains
	s.mu.Unlock()
	if refuse && createsCommitted(b) {
		// As a refused chain: the receipt layer goes through Begin and
		// Decide, a write at a time.
		return 0, &store.ConditionError{Cond: b.Conds[0]}
	}
	var v store.Version
	err := s.write(ctx, []*store.Batch{b}, func() (err error) {
		v, err = s.inner.Apply(ctx, b)
		return err
	})
	return v, err
}

// chainStore is a nodeStore whose store can chain writes (store.Chainer),
// so that the receipt layer takes its default chained path; a chain meets
// the same faults as an Apply, and like a failed condition of the engine's
// they leave nothing written.
type chainStore struct{ *nodeStore }

// Capabilities implements store.Store: chains, through the gate.
func (s chainStore) Capabilities() store.Capabilities { return store.Capabilities{Chain: s} }

func (s chainStore) ApplyChain(ctx context.Context, links ...*store.Batch) ([]store.Version, error) {
	s.mu.Lock()
	refuse := s.faults.refuseChains
	s.mu.Unlock()
	if refuse && len(links) > 0 && len(links[0].Conds) > 0 {
		// As if a condition failed: nothing is written, and the caller
		// goes through its one-write-at-a-time path.
		return nil, &store.ConditionError{Cond: links[0].Conds[0]}
	}
	var vs []store.Version
	err := s.write(ctx, links, func() (err error) {
		vs, err = s.inner.Capabilities().Chain.ApplyChain(ctx, links...)
		return err
	})
	return vs, err
}

// write makes one write of batches (an Apply, or a chain's links) through
// apply, unless an armed fault answers for it: a transient error or a bare
// decision conflict (nothing written), or an ambiguous receipt creation
// (written first or not, as the faults say). A write an armed trigger
// matches pauses the node first.
func (s *nodeStore) write(ctx context.Context, batches []*store.Batch, apply func() error) error {
	label := s.label(ctx, "write", batchKeys(batches)...)
	if err := s.enter(ctx, label); err != nil {
		return err
	}
	if t := s.takeTrigger(batches); t != nil {
		t.fired.Store(true)
		if t.fail {
			return errTransient
		}
		s.pauseNow()
		if err := s.enter(ctx, label); err != nil {
			return err
		}
	}
	s.mu.Lock()
	f, owner := s.faults, s.owner
	s.mu.Unlock()
	if s.roll(f.transient) {
		return errTransient
	}
	for _, b := range batches {
		if key, ok := condOn(b, store.MustBeAbsent, decisionPrefix); ok && s.roll(f.bareConflict) {
			// "Someone else decided" — with no decision anyone can read.
			return &store.ConditionError{Cond: store.Condition{Key: key, Kind: store.MustBeAbsent}}
		}
	}
	write := func() error { return s.audit.write(ctx, owner, batches, apply) }
	if _, ok := condOn(batches[0], store.MustBeAbsent, []byte(store.NSReceipt)); ok && s.roll(f.ambiguousNew) {
		if f.ambiguousWrote {
			if err := write(); err != nil {
				return err
			}
		}
		return store.ErrAmbiguous
	}
	return write()
}

var decisionPrefix = store.NSTxn.Prefix("dec")

// createsCommitted reports whether b is the one write that commits a
// transaction and creates its receipt terminal (twopc.CommitOnce with the
// receipt layer's terminal receipt): conditioned on the receipt's and the
// transaction's absence, it puts a terminal receipt.
func createsCommitted(b *store.Batch) bool {
	rk, newReceipt := condOn(b, store.MustBeAbsent, []byte(store.NSReceipt))
	if _, newTxn := condOn(b, store.MustBeAbsent, store.NSTxn.Prefix("rec")); !newReceipt || !newTxn {
		return false
	}
	for _, op := range b.Ops {
		if !op.Delete && bytes.Equal(op.Key, rk) {
			rec, err := receipt.DecodeRecord(op.Value)
			return err == nil && rec.State == receipt.Terminal
		}
	}
	return false
}

func condOn(b *store.Batch, kind store.CondKind, prefix []byte) ([]byte, bool) {
	for _, c := range b.Conds {
		if c.Kind == kind && bytes.HasPrefix(c.Key, prefix) {
			return c.Key, true
		}
	}
	return nil, false
}
