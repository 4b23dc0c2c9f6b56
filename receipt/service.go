package receipt

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

// Service is the receipt layer a host database calls as a library: the
// keyed batch flow (Execute), the fast path, interactive sessions, and the
// loops that recover and clean receipts. It is a facade over the
// components it owns (core.go lists them); each method names the one it
// calls.
type Service struct {
	core   *core
	exec   *executor
	flow   *flow
	recov  *recovery
	retain *retention
	sess   *sessions
	plans  *plans

	sup    *lease.Supervisor
	recent recentKeys // keys created or answered here lately (createfirst.go)

	stop  chan struct{}
	loops sync.WaitGroup
	once  sync.Once
}

// Open registers a new incarnation of opts.Node in store and starts the
// renewal supervisor, the recovery maintenance and the retention cleaner.
func Open(ctx context.Context, st store.Store, opts Options) (*Service, error) {
	opts = opts.withDefaults()
	owner, err := lease.RegisterAt(ctx, st, opts.Node, opts.Advertise)
	if err != nil {
		return nil, err
	}
	knobs := testknobs.TwoPC{DeferResolution: opts.knobs.DeferResolution}
	tables, coord := table.NewWithCoordinator(st, twopc.WithTestKnobs(twopc.Options{Now: opts.Clock.Now}, knobs))
	if n, err := tables.MigrateLegacy(ctx, opts.LegacyTableOwner); err != nil {
		return nil, err
	} else if n > 0 {
		opts.Logger.Info("receipt: tables created before tables had owners now belong to one principal",
			"tables", n, "owner", opts.LegacyTableOwner)
	}
	s := newService(newCore(st, coord, tables, owner, opts))
	s.sup = lease.NewSupervisor(s.core.active, s.core.hb, lease.SupervisorOptions{
		Interval: opts.RenewInterval,
		OnLost:   func(*lease.Held) { s.core.stats.fenced.Add(1) },
	})
	s.sup.Start()
	// Neither loop runs on a store that refuses writes: every pass would
	// fail the same way, and the store has said why once already.
	s.startLoop(opts.MaintainInterval, func(ctx context.Context) {
		if s.core.refusesWrites() != nil {
			return
		}
		if _, err := s.MaintainOnce(ctx); err != nil && ctx.Err() == nil {
			opts.Logger.Warn("receipt: maintenance pass failed", "err", err)
		}
	})
	s.startLoop(opts.CleanInterval, func(ctx context.Context) {
		if s.core.refusesWrites() != nil {
			return
		}
		if _, err := s.retain.cleanTick(ctx); err != nil && ctx.Err() == nil {
			opts.Logger.Warn("receipt: cleaner pass failed", "err", err)
		}
	})
	opts.Logger.Info("receipt: service open", "owner", owner.String(), "lease_ttl", opts.LeaseTTL,
		"renew_interval", s.sup.Interval(), "retention", opts.Retention)
	return s, nil
}

// newService wires the components over c: each gets the links it calls
// through, and nothing else.
func newService(c *core) *Service {
	x := newExecutor(c)
	p := &plans{core: c}
	f := &flow{core: c, exec: x, replan: p.planStored}
	r := &recovery{core: c, exec: x, flow: f}
	ss := newSessions(c, x, f, r, p)
	rt := &retention{core: c, sess: ss}
	f.recov, f.retain, r.retain = r, rt, rt
	return &Service{core: c, exec: x, flow: f, recov: r, retain: rt, sess: ss, plans: p, stop: make(chan struct{})}
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
		if s.core.opts.FirstPassMax > 0 {
			wait = min(interval, s.core.opts.FirstPassMax)
		}
		for {
			select {
			case <-s.stop:
				return
			case <-s.core.clock.After(wait):
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
func (s *Service) Owner() lease.Owner { return s.core.owner }

// Tables gives access to table management and document reads.
func (s *Service) Tables() *table.Tables { return s.core.tables }

// Locate returns the address the live owner o advertises (its node record,
// lease.RegisterAt), or "" when o is not that node's current incarnation
// (it died and restarted: nothing to forward to) or advertises none.
func (s *Service) Locate(ctx context.Context, o lease.Owner) (string, error) {
	n, err := lease.ReadNode(ctx, s.core.store, o.Node)
	if err != nil {
		return "", err
	}
	if n.Owner != o && !(fault.Planted(fault.BugLocateNodeOnly) && n.Owner.Node == o.Node) { // planted only under -tags idem_selftest
		return "", nil
	}
	return n.Advertise, nil
}

// Coordinator is the 2PC coordinator (for recovery tooling and tests).
func (s *Service) Coordinator() *twopc.Coordinator { return s.core.coord }

// Supervisor is the renewal supervisor (for metrics and tests).
func (s *Service) Supervisor() *lease.Supervisor { return s.sup }

// Active is the renewal active set (for metrics and tests).
func (s *Service) Active() *lease.ActiveSet { return s.core.active }

// WaitMax is the longest wait a keyed request is granted (Options.WaitMax):
// a Request.Wait beyond it is cut to it.
func (s *Service) WaitMax() time.Duration { return s.core.opts.WaitMax }

// SessionTTLMax is the longest TTL a session may ask for
// (Options.SessionTTLMax).
func (s *Service) SessionTTLMax() time.Duration { return s.core.opts.SessionTTLMax }

// load reads and decodes a receipt.
// loadWithMeta is load, reading principal's table metadata item in the
// same round trip (store.GetAll): a new key's plan needs it.
func (c *core) loadWithMeta(ctx context.Context, id, principal, tbl string) (*Record, store.Version, *Tombstone, store.Item, error) {
	items, err := store.GetAll(ctx, c.store, receiptKey(id), table.MetaKey(principal, tbl), tombKey(id))
	if err != nil {
		return nil, 0, nil, store.Item{}, err
	}
	if items[0].Version == 0 {
		if items[2].Version == 0 {
			return nil, 0, nil, items[1], store.ErrNotFound
		}
		t, err := decodeTomb(id, items[2].Value)
		return nil, 0, t, items[1], err
	}
	rec, err := recordAt(items[0].Key, items[0].Value)
	if err != nil {
		return nil, 0, nil, store.Item{}, err
	}
	return rec, items[0].Version, nil, items[1], nil
}

// loadOrTomb loads receipt id or, when there is none, its tombstone;
// store.ErrNotFound when there is neither.
func (c *core) loadOrTomb(ctx context.Context, id string) (*Record, store.Version, *Tombstone, error) {
	return c.loadOrTombAt(ctx, id, keysOf(id))
}

// loadOrTombAt is loadOrTomb at keys, id's.
func (c *core) loadOrTombAt(ctx context.Context, id string, keys receiptKeys) (*Record, store.Version, *Tombstone, error) {
	rec, ver, err := c.loadAt(ctx, keys.receipt)
	if !errors.Is(err, store.ErrNotFound) {
		return rec, ver, nil, err
	}
	t, err := c.loadTombAt(ctx, id, keys.tomb)
	return nil, 0, t, err
}

func (c *core) load(ctx context.Context, id string) (*Record, store.Version, error) {
	return c.loadAt(ctx, receiptKey(id))
}

// loadAt loads the receipt at key rk.
func (c *core) loadAt(ctx context.Context, rk []byte) (*Record, store.Version, error) {
	it, err := c.store.Get(ctx, rk)
	if err != nil {
		return nil, 0, err
	}
	rec, err := recordAt(it.Key, it.Value)
	if err != nil {
		return nil, 0, err
	}
	return rec, it.Version, nil
}
