package receipt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
	"github.com/idemdb/idem/vfs/memfs"
)

// planCase is one way to reach a route: the store and the knobs under
// which a keyed request takes it.
type planCase struct {
	route  createRoute
	name   string
	engine bool // the local engine on a simulated disk (it chains); else memstore
	// unchained hides the engine's chains (store.Capabilities().Chain), as
	// a wrapper that does not forward them would.
	unchained bool
	knobs     testknobs.Receipt
	// outcome: refused sends a batch a participant votes no on;
	// contended has another writer change the documents under the
	// steps planFor makes fail (contendedCases).
	outcome createOutcome
}

var planCases = []planCase{
	{route: routeNotApplied, name: "memstore"},
	{route: routeNotApplied, name: "engine", engine: true},
	{route: routePending, name: "memstore"},
	{route: routePending, name: "engine", engine: true},
	{route: routeOnce, name: "engine", engine: true},
	// One write needs no chain (issue 39): the stores that do not chain
	// take it too.
	{route: routeOnce, name: "memstore"},
	{route: routeOnce, name: "engine, chains hidden", engine: true, unchained: true},
	{route: routeChained, name: "engine, deferred resolution", engine: true, knobs: testknobs.Receipt{DeferResolution: true}},
	{route: routeBeginDecide, name: "memstore, separate decide", knobs: testknobs.Receipt{SeparateDecide: true}},
	{route: routeBeginDecide, name: "memstore, deferred resolution", knobs: testknobs.Receipt{DeferResolution: true}},
	{route: routeBeginDecide, name: "engine, chains hidden, deferred resolution", engine: true, unchained: true,
		knobs: testknobs.Receipt{DeferResolution: true}},
	{route: routeBeginDecide, name: "engine, separate decide", engine: true, knobs: testknobs.Receipt{SeparateDecide: true}},
	{route: routeBeginDecide, name: "engine, separate decide, deferred resolution", engine: true,
		knobs: testknobs.Receipt{SeparateDecide: true, DeferResolution: true}},
	{route: routeOnce, name: "engine", engine: true, outcome: outcomeRefused},
	{route: routeChained, name: "engine, deferred resolution", engine: true, knobs: testknobs.Receipt{DeferResolution: true},
		outcome: outcomeRefused},
	{route: routeOnce, name: "memstore", outcome: outcomeRefused},
	{route: routeBeginDecide, name: "memstore, separate decide", knobs: testknobs.Receipt{SeparateDecide: true}, outcome: outcomeRefused},
	{route: routeBeginDecide, name: "memstore, deferred resolution", knobs: testknobs.Receipt{DeferResolution: true},
		outcome: outcomeRefused},
}

// contendedCases are the routes under contention (outcomeContended).
var contendedCases = []planCase{
	{route: routeOnce, name: "engine", engine: true, outcome: outcomeContended},
	{route: routeChained, name: "engine, deferred resolution", engine: true, knobs: testknobs.Receipt{DeferResolution: true},
		outcome: outcomeContended},
	{route: routeOnce, name: "memstore", outcome: outcomeContended},
	{route: routeBeginDecide, name: "memstore, separate decide", knobs: testknobs.Receipt{SeparateDecide: true}, outcome: outcomeContended},
	{route: routeBeginDecide, name: "engine, separate decide", engine: true, knobs: testknobs.Receipt{SeparateDecide: true},
		outcome: outcomeContended},
}

func (c planCase) String() string {
	if c.outcome != outcomeCommitted {
		return c.route.String() + ", " + c.outcome.String() + ", on " + c.name
	}
	return c.route.String() + " on " + c.name
}

// plan is the case's plan.
func (c planCase) plan() writePlan { return planFor(c.route, c.outcome, c.knobs.DeferResolution) }

// planTable is the table of the plan tests' requests; planBatch inserts a
// document and increments a counter (upserted), so that it writes and
// conditions on documents both new and existing.
const planTable = "t"

func planBatch(t *testing.T, key string) *table.Batch {
	t.Helper()
	return decodePlanBatch(t, fmt.Sprintf(`{"inserts":[{"id":"doc-%s","doc":{"k":1}}],"transforms":[{"id":"ctr","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`, key))
}

// refusedBatch is planBatch with its transform on a document that does
// not exist and may not be created: the shard votes no (document_not_found).
func refusedBatch(t *testing.T, key string) *table.Batch {
	t.Helper()
	return decodePlanBatch(t, fmt.Sprintf(`{"inserts":[{"id":"doc-%s","doc":{"k":1}}],"transforms":[{"id":"missing","ops":[{"op":"$inc","path":"n","value":1}]}]}`, key))
}

func decodePlanBatch(t *testing.T, body string) *table.Batch {
	t.Helper()
	b, err := table.DecodeBatch([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// planRequest is the case's request: to a table that does not exist for
// not_applied (table_not_found is a refusal before execution), with a
// batch voted no on for refused.
func (c planCase) request(t *testing.T, key string) Request {
	tbl := planTable
	if c.route == routeNotApplied {
		tbl = "missing"
	}
	b := planBatch(t, key)
	if c.outcome == outcomeRefused {
		b = refusedBatch(t, key)
	}
	return Request{Principal: "alice", Table: tbl, Key: key, Batch: b}
}

// planEnv is a store and a clock shared by the services of one plan test.
type planEnv struct {
	t     *testing.T
	inner store.Store
	rec   *recStore
	clock *lease.Sim
}

func newPlanEnv(t *testing.T, c planCase) *planEnv {
	e := &planEnv{t: t, inner: memstore.New(), clock: lease.NewSim(time.Unix(1_700_000_000, 0))}
	if c.engine {
		db, err := engine.Open("/data", engine.Options{Logger: slog.New(slog.DiscardHandler), FS: memfs.NewDisk().FS(), ColdValue: ColdValue})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		e.inner = db
	}
	e.rec = &recStore{Store: e.inner, budget: -1, unchained: c.unchained}
	return e
}

// open starts a service of node on st with the case's knobs, its loops
// driven by hand; it is closed at cleanup (Close only stops its loops).
func (e *planEnv) open(st store.Store, node string, c planCase, executors int) *Service {
	e.t.Helper()
	opts := WithTestKnobs(Options{Node: node, Clock: e.clock, LeaseTTL: 6 * time.Second, RenewInterval: time.Second,
		MaintainInterval: -1, CleanInterval: -1, ExecutorMax: executors, InflightPerPrincipalMax: 8,
		Logger: slog.New(slog.DiscardHandler)}, c.knobs)
	s, err := Open(context.Background(), st, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(s.Close)
	return s
}

// first opens the service that sends the case's request, on the recording
// store, with its table, and with its only executor slot held for the
// pending route (the slot is given back at cleanup).
func (e *planEnv) first(c planCase) *Service {
	e.t.Helper()
	s := e.open(e.rec, "node-0", c, 1)
	if _, _, err := s.Tables().Create(context.Background(), "alice", planTable, 0); err != nil {
		e.t.Fatal(err)
	}
	if c.route == routePending {
		sl, ok := s.exec.tryAcquire()
		if !ok {
			e.t.Fatal("the executor's slot is taken")
		}
		e.t.Cleanup(func() { s.exec.release(sl) })
	}
	return s
}

// recorded is what one Apply, or one link of a chain, conditioned on and
// wrote, by kind of key.
type recorded struct {
	conds, writes keyKinds
	linked        bool
}

// recStore records the writes made through it once armed, and crashes
// after budget of them (a negative budget never does): the write that
// would exceed it is not made — a chain keeps the links within it, as a
// crash may keep a prefix of a chain (store.Chainer) — and it and every
// later write fail as the store of a dead process would. Reads pass.
type recStore struct {
	store.Store
	unchained bool // hide the inner store's chains
	mu        sync.Mutex
	armed     bool
	budget    int
	dead      bool
	steps     []recorded
}

// errCrashed is what a write returns once the process is taken for dead.
var errCrashed = fmt.Errorf("%w: the process crashed", store.ErrAmbiguous)

// Capabilities implements store.Store: the inner store's, with its chains
// made through the recorder, or hidden.
func (s *recStore) Capabilities() store.Capabilities {
	c := s.Store.Capabilities()
	switch {
	case s.unchained:
		c.Chain = nil
	case c.Chain != nil:
		c.Chain = s
	}
	return c
}

// arm records from now on and crashes after budget writes.
func (s *recStore) arm(budget int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.budget, s.steps = true, budget, nil
}

// kill takes the process for dead: no write of it is made any more.
func (s *recStore) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dead = true
}

func (s *recStore) recorded() []recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recorded(nil), s.steps...)
}

// admit says how many of links may be made, recording them.
func (s *recStore) admit(links []*store.Batch) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(links)
	switch {
	case s.dead:
		n = 0
	case s.budget >= 0 && s.budget < n:
		n = s.budget
	}
	if s.budget >= 0 {
		s.budget -= n
	}
	s.dead = s.dead || n < len(links)
	if s.armed {
		for i, b := range links[:n] {
			s.steps = append(s.steps, recorded{conds: condKinds(b), writes: opKinds(b), linked: i > 0})
		}
	}
	return n
}

func (s *recStore) Apply(ctx context.Context, b *store.Batch) (store.Version, error) {
	if s.admit([]*store.Batch{b}) == 0 {
		return 0, errCrashed
	}
	return s.Store.Apply(ctx, b)
}

func (s *recStore) ApplyChain(ctx context.Context, links ...*store.Batch) ([]store.Version, error) {
	n := s.admit(links)
	if n == 0 {
		return nil, errCrashed
	}
	vs, err := s.Store.Capabilities().Chain.ApplyChain(ctx, links[:n]...)
	if err == nil && n < len(links) {
		return nil, errCrashed
	}
	return vs, err
}

func condKinds(b *store.Batch) keyKinds {
	var k keyKinds
	for _, c := range b.Conds {
		k |= kindOfKey(c.Key)
	}
	return k
}

func opKinds(b *store.Batch) keyKinds {
	var k keyKinds
	for _, op := range b.Ops {
		k |= kindOfKey(op.Key)
	}
	return k
}

// kindOfKey classifies a key by namespace and role.
func kindOfKey(key []byte) keyKinds {
	sub := func(ns store.Namespace, p string) bool { return bytes.HasPrefix(key, append([]byte(ns), p...)) }
	switch {
	case store.NSReceipt.Has(key):
		return kindReceipt
	case store.NSTomb.Has(key):
		return kindTomb
	case sub(store.NSLease, "claim/"):
		return kindClaim
	case sub(store.NSLease, "ttl/"):
		return kindLeaseTTL
	case store.NSRecovery.Has(key):
		return kindRecovery
	case store.NSExpiry.Has(key):
		return kindRetention
	case sub(store.NSTxn, "rec/"):
		return kindTxnRecord
	case sub(store.NSTxn, "dec/"):
		return kindDecision
	case store.NSIntent.Has(key):
		return kindIntent
	case store.NSTable.Has(key):
		return kindDocument
	case store.NSMeta.Has(key):
		return kindMeta
	}
	return kindOther
}

// TestPlanOf_IsWhatTheStoreSees: one keyed request per route, on memstore
// and on the engine (which chains), makes exactly its plan's Applies and
// links, in order, each conditioned on and writing the kinds of keys its
// step says — those a step has only for some batches or clocks allowed,
// not required.
func TestPlanOf_IsWhatTheStoreSees(t *testing.T) {
	for _, c := range planCases {
		t.Run(c.String(), func(t *testing.T) {
			e := newPlanEnv(t, c)
			s := e.first(c)
			e.rec.arm(-1)
			var applied appliedSteps
			ans, err := s.Execute(applied.observe(context.Background()), c.request(t, "k1"))
			if err != nil || ans.Terminal != (c.route != routePending) {
				t.Fatalf("answer %+v (%v): terminal must be all but a pending one", ans, err)
			}
			plan := c.plan()
			applied.want(t, plan)
			wantRecorded(t, e.rec.recorded(), plan)
		})
	}
}

// wantRecorded checks the writes the store saw against plan's steps.
func wantRecorded(t *testing.T, got []recorded, plan writePlan) {
	t.Helper()
	if len(got) != len(plan.steps) {
		t.Fatalf("%d writes %+v, the plan has %d steps %+v", len(got), got, len(plan.steps), plan.steps)
	}
	for i, st := range plan.steps {
		g := got[i]
		if !within(g.conds, st.conds, st.condsIf) || !within(g.writes, st.writes, st.writesIf) || g.linked != st.linked {
			t.Errorf("write %d: conditions %v, writes %v (linked %v); step %q: conditions %v (+ maybe %v), writes %v (+ maybe %v) (linked %v)",
				i, g.conds, g.writes, g.linked, st.name, st.conds, st.condsIf, st.writes, st.writesIf, st.linked)
		}
	}
}

// TestPlanFor_ContentionFailsTheTriesItPlansThenFallsBack: another
// writer changes the documents right before each step planFor says
// fails (as ApplySteps receives it), and the request makes exactly the
// plan's writes — the failed tries, then the fallback's — and commits.
func TestPlanFor_ContentionFailsTheTriesItPlansThenFallsBack(t *testing.T) {
	for _, c := range contendedCases {
		t.Run(c.String(), func(t *testing.T) {
			ctx := context.Background()
			e := newPlanEnv(t, c)
			s := e.first(c)
			if ans, err := s.Execute(ctx, c.request(t, "k0")); err != nil || ans.Outcome != OutcomeCommitted {
				t.Fatalf("the request that creates the counter: %+v (%v)", ans, err)
			}
			settle(t, s) // its visibility debt paid: the contention is the test's alone
			plan := c.plan()
			e.rec.arm(-1)
			applied := appliedSteps{before: func(i int) {
				if i < len(plan.steps) && plan.steps[i].fails {
					e.touchDocuments()
				}
			}}
			ans, err := s.Execute(applied.observe(ctx), c.request(t, "k1"))
			if err != nil || ans.Outcome != OutcomeCommitted {
				t.Fatalf("answer %+v (%v), want committed", ans.Envelope, err)
			}
			applied.want(t, plan)
			wantRecorded(t, e.rec.recorded(), plan)
			raw, err := s.Tables().Get(ctx, "alice", planTable, "ctr")
			var doc struct{ N int }
			if err != nil || json.Unmarshal(raw, &doc) != nil || doc.N != 2 {
				t.Fatalf("counter %s (%v), want n=2: each batch applied once", raw, err)
			}
		})
	}
}

// touchDocuments writes every document again as it is, behind the
// recorder: a new version, which fails a condition on the one read.
func (e *planEnv) touchDocuments() {
	e.t.Helper()
	ctx := context.Background()
	items, err := e.inner.Scan(ctx, []byte(store.NSTable), nil, store.ScanLimitMax)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, it := range items {
		if !store.NSTable.Has(it.Key) {
			continue
		}
		if _, err := e.inner.Apply(ctx, new(store.Batch).AtVersion(it.Key, it.Version).Put(it.Key, it.Value)); err != nil {
			e.t.Fatal(err)
		}
	}
}

// TestPlanOf_FailpointsComeBeforeTheirSteps: each failpoint a step names,
// armed to fail, stops the request with exactly the steps before that one
// written.
func TestPlanOf_FailpointsComeBeforeTheirSteps(t *testing.T) {
	testsupport.RequireFailpoints(t)
	for _, c := range planCases {
		for i, st := range c.plan().steps {
			for _, fp := range st.before {
				t.Run(fmt.Sprintf("%v/%s/%s", c, st.name, fp), func(t *testing.T) {
					e := newPlanEnv(t, c)
					s := e.first(c)
					e.rec.arm(-1)
					disarm := testsupport.Arm(t, fp, `return("crash")`)
					_, _ = s.Execute(context.Background(), c.request(t, "k1"))
					disarm()
					if got := len(e.rec.recorded()); got != i {
						t.Fatalf("%d writes before %s, want %d (the steps before %q)", got, fp, i, st.name)
					}
				})
			}
		}
	}
}

// appliedSteps is what twopc.ApplySteps received under one request's
// context, step by step: the plan as executed.
type appliedSteps struct {
	// before, if set, is called with the index of the first step of each
	// call, before its steps are written.
	before func(i int)
	mu     sync.Mutex
	steps  []twopc.Step
}

// observe returns ctx under which ApplySteps reports to a.
func (a *appliedSteps) observe(ctx context.Context) context.Context {
	return twopc.ObserveSteps(ctx, func(steps []twopc.Step) {
		a.mu.Lock()
		i := len(a.steps)
		a.steps = append(a.steps, steps...)
		a.mu.Unlock()
		if a.before != nil {
			a.before(i)
		}
	})
}

// want checks that the applier received p's steps, by name and link, in
// order: the steps executed are the ones planned.
func (a *appliedSteps) want(t *testing.T, p writePlan) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	var got, want []string
	for _, s := range a.steps {
		got = append(got, fmt.Sprintf("%s (linked %v)", s.Name, s.Linked))
	}
	for _, s := range p.steps {
		want = append(want, fmt.Sprintf("%s (linked %v)", s.name, s.linked))
	}
	if !slices.Equal(got, want) {
		t.Errorf("the applier received %q, the plan of %v is %q", got, p.route, want)
	}
}

// within reports whether got holds every kind of always and no kind
// outside always and maybe.
func within(got, always, maybe keyKinds) bool {
	return got&always == always && got&^(always|maybe) == 0
}
