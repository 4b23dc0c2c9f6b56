package receipt

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

// Service is the receipt layer a host database calls as a library.
//
// Concurrency. Every receipt this process works on has at most one local
// flight (flights): the goroutine that holds it is the only one here that
// writes the receipt; duplicates wait on the flight. Across processes,
// ownership is the lease claim and every receipt write is fenced by it.
type Service struct {
	store  engine.Store
	tables *table.Tables
	coord  *twopc.Coordinator
	clock  lease.Clock
	owner  lease.Owner
	opts   Options

	active *lease.ActiveSet
	hb     *lease.Heartbeat
	sup    *lease.Supervisor
	exec   chan struct{} // executor slots

	flights sync.Map // txn_id -> *flight

	releaseMu sync.Mutex
	releaseQ  []string
	decCursor []byte // maintenance scan position in txn/v1/dec (under releaseMu)

	stats counters
	stop  chan struct{}
	loops sync.WaitGroup
	once  sync.Once
}

// Open registers a new incarnation of opts.Node in store and starts the
// renewal supervisor, the recovery maintenance and the retention cleaner.
func Open(ctx context.Context, store engine.Store, opts Options) (*Service, error) {
	opts = opts.withDefaults()
	owner, err := lease.Register(ctx, store, opts.Node)
	if err != nil {
		return nil, err
	}
	tables, coord := table.NewWithCoordinator(store, twopc.Options{DeferResolution: opts.DeferResolution, Now: opts.Clock.Now})
	if n, err := tables.MigrateLegacy(ctx, opts.LegacyTableOwner); err != nil {
		return nil, err
	} else if n > 0 {
		opts.Logger.Info("receipt: tables created before tables had owners now belong to one principal",
			"tables", n, "owner", opts.LegacyTableOwner)
	}
	s := &Service{
		store:  store,
		tables: tables,
		coord:  coord,
		clock:  opts.Clock,
		owner:  owner,
		opts:   opts,
		active: lease.NewActiveSet(),
		exec:   make(chan struct{}, opts.ExecutorMax),
		stop:   make(chan struct{}),
	}
	s.hb = &lease.Heartbeat{Store: store, Clock: opts.Clock, TTL: opts.LeaseTTL, Margin: opts.SafetyMargin}
	s.sup = lease.NewSupervisor(s.active, s.hb, lease.SupervisorOptions{
		Interval: opts.RenewInterval,
		OnLost:   func(*lease.Held) { s.stats.fenced.Add(1) },
	})
	s.sup.Start()
	// Neither loop runs on a store that refuses writes: every pass would
	// fail the same way, and the store has said why once already.
	s.startLoop(opts.MaintainInterval, func(ctx context.Context) {
		if s.refusesWrites() != nil {
			return
		}
		if _, err := s.MaintainOnce(ctx); err != nil && ctx.Err() == nil {
			opts.Logger.Warn("receipt: maintenance pass failed", "err", err)
		}
	})
	s.startLoop(opts.CleanInterval, func(ctx context.Context) {
		if s.refusesWrites() != nil {
			return
		}
		if _, err := s.cleanTick(ctx); err != nil && ctx.Err() == nil {
			opts.Logger.Warn("receipt: cleaner pass failed", "err", err)
		}
	})
	opts.Logger.Info("receipt: service open", "owner", owner.String(), "lease_ttl", opts.LeaseTTL,
		"renew_interval", s.sup.Interval(), "retention", opts.Retention)
	return s, nil
}

// defaultFirstPassMax is Options.FirstPassMax's default.
const defaultFirstPassMax = time.Second

// startLoop runs fn every interval on its own goroutine until Close, the
// first time after at most Options.FirstPassMax; a negative interval
// disables it.
func (s *Service) startLoop(interval time.Duration, fn func(context.Context)) {
	if interval < 0 {
		return
	}
	s.loops.Add(1)
	go func() {
		defer s.loops.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-s.stop
			cancel()
		}()
		wait := interval
		if s.opts.FirstPassMax > 0 {
			wait = min(interval, s.opts.FirstPassMax)
		}
		for {
			select {
			case <-s.stop:
				return
			case <-s.clock.After(wait):
			}
			fn(ctx)
			wait = interval
		}
	}()
}

// Close stops the background loops. Receipts in flight stay in the store
// under their leases; the next incarnation adopts them at once.
func (s *Service) Close() {
	s.once.Do(func() {
		close(s.stop)
		s.sup.Stop()
		s.loops.Wait()
	})
}

// Owner is this process's identity.
func (s *Service) Owner() lease.Owner { return s.owner }

// Tables gives access to table management and document reads.
func (s *Service) Tables() *table.Tables { return s.tables }

// Coordinator is the 2PC coordinator (for recovery tooling and tests).
func (s *Service) Coordinator() *twopc.Coordinator { return s.coord }

// Supervisor is the renewal supervisor (for metrics and tests).
func (s *Service) Supervisor() *lease.Supervisor { return s.sup }

// Active is the renewal active set (for metrics and tests).
func (s *Service) Active() *lease.ActiveSet { return s.active }

// WaitMax is the longest wait a keyed request is granted (Options.WaitMax):
// a Request.Wait beyond it is cut to it.
func (s *Service) WaitMax() time.Duration { return s.opts.WaitMax }

// ExecuteFast runs a key-less batch on the fast path: preflight and one
// atomic Apply, no receipt. Failures are *code.Error where typed.
func (s *Service) ExecuteFast(ctx context.Context, principal, tbl string, b *table.Batch) (table.Result, error) {
	// A batch with nothing to write never reaches the store, which would
	// answer it 201 while it accepts no writes.
	if s.refusesWrites() != nil {
		return table.Result{}, errUnavailable()
	}
	plan, err := s.tables.Preflight(ctx, principal, tbl, b)
	if err != nil {
		return table.Result{}, err
	}
	return s.tables.ApplyFast(ctx, plan)
}

// View is an operator's view of a receipt.
type View struct {
	TxnID    string
	State    State
	Owner    *lease.Claim
	Created  time.Time
	Envelope *Envelope // terminal receipts only
	Debt     Debt
}

// Lookup returns the receipt of (principal, table, key): its state and, if
// terminal, its envelope. A missing receipt is engine.ErrNotFound.
func (s *Service) Lookup(ctx context.Context, principal, tbl, key string) (View, error) {
	if !ValidKey(key) {
		return View{}, code.Errorf(code.InvalidKey, "Idempotency-Key must be 1..%d visible ASCII characters", KeyBytesMax)
	}
	if !table.ValidTableName(tbl) {
		return View{}, table.InvalidTableName(tbl)
	}
	id := Bind(principal, tbl, key)
	rec, _, err := s.load(ctx, id)
	if err != nil {
		return View{}, err
	}
	v := View{TxnID: id, State: rec.State, Owner: rec.Owner, Created: time.UnixMilli(rec.Created), Debt: rec.Debt}
	if rec.State == Terminal {
		e := EnvelopeOf(rec, id)
		v.Envelope = &e
	} else if st, err := lease.Read(ctx, s.store, id); err == nil && st.ClaimVersion != 0 {
		v.Owner = &st.Claim
	}
	return v, nil
}

// load reads and decodes a receipt.
func (s *Service) load(ctx context.Context, id string) (*Record, engine.Version, error) {
	it, err := s.store.Get(ctx, receiptKey(id))
	if err != nil {
		return nil, 0, err
	}
	rec, err := DecodeRecord(it.Value)
	if err != nil {
		return nil, 0, err
	}
	return rec, it.Version, nil
}

func resultJSON(r table.Result) []byte {
	b, _ := json.Marshal(r)
	return b
}

var errRetry = errors.New("receipt: retry lookup")
