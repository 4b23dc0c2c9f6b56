package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/cryptotest"
	"testing/synctest"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// Config describes one scenario. Everything random in it derives from Seed.
type Config struct {
	Seed    int64
	Variant Variant
	Nodes   int // shared variant: 2 or 3 (standalone: always 1)
	Clients int // concurrent keyed clients per step
	// SessionClients run interactive sessions (session.go), one leg a step.
	SessionClients int
	Keys           int     // workload keys (< keysMax: the rest are the faults' own, see inducedKeys)
	Docs           int     // counters
	Steps          int     // steps of the schedule
	FaultRate      float64 // probability that a step injects a fault
	// ExecutorMax small values fill the executor (429, pending receipts).
	ExecutorMax int
	// Retention and MaintainInterval on the simulated clock; a retention
	// shorter than the maintenance interval leaves receipts with debt past
	// their first expiry deadline, which the cleaner must skip.
	Retention, MaintainInterval time.Duration
	// TombstoneRetention is receipt.Options': negative opts out (a cleaned
	// key is a new request at once); a few retentions keep cleaned keys
	// refused, then new, within one run.
	TombstoneRetention time.Duration
	// Chained gives the nodes a store that chains writes, so new receipts
	// take a one-wait path (one write, or twopc.BeginCommit's chain);
	// otherwise a receipt whose transaction commits directly is one write
	// (twopc.CommitOnce) and any other decides in a write of its own.
	Chained bool
	// SeparateDecide writes every receipt's decision apart from its Begin
	// (testknobs.Receipt): the two-write route an unchained store took
	// before one write, which a crash, a zombie or a planted bug can come
	// between.
	SeparateDecide bool
	// DeferResolution leaves intents to maintenance (testknobs.Receipt):
	// terminal receipts keep visibility debt, and their lease, until it is
	// paid, and the cleaner must leave them alone.
	DeferResolution bool
	// Hot makes every keyed batch increment-only (issue 37's hot
	// documents): $inc on its counters and on its own marker document, no
	// insert. Such a batch is never refused for contention: a
	// transaction_conflict answer to one is a violation (hot.go).
	Hot bool
	// Bugs arms planted bugs for the whole run (checker self-test).
	Bugs []string
	// Store, if set, is the store the nodes share instead of an engine on
	// the harness's in-memory disk: an empty one (a fresh etcd prefix,
	// say), built outside the bubble, that outlives the run (its owner
	// closes it). Its calls run outside the bubble (bridge), taking no
	// simulated time. Its store crashes crash the nodes only (Standalone:
	// the one node), and the faults that damage the engine's files
	// (ckpt-damage, vlog-damage, crashes at WAL and engine failpoints)
	// are scheduled as restarts. Chained needs a store that chains.
	Store store.Store
	// OutDir receives visualizations on failure. (The engine lives on an
	// in-memory disk that crashes honestly: see cluster.)
	OutDir string
	Log    io.Writer
}

func (c Config) nodes() int {
	if c.Variant == Standalone || c.Nodes < 1 {
		return 1
	}
	return c.Nodes
}

// Scenario timing, all simulated (the bubble's clock).
const (
	leaseTTL        = 10 * time.Second
	tick            = 250 * time.Millisecond // the nodes' polling step (Options.WaitPoll)
	stepTimeMax     = 2 * time.Minute        // a step's client operations must finish within it (liveness)
	actorTimeMax    = 5 * time.Minute        // and so must each thing the harness has a node do
	clientTimeout   = 10 * time.Minute       // longer than stepTimeMax: a stuck client is a liveness failure, not a timeout
	stabilizeRounds = 12
	crashArmedSteps = 4
)

// checkTimeout bounds the linearizability check, in real time (it runs
// outside the bubble).
const checkTimeout = 30 * time.Second

// Result is what a scenario found.
type Result struct {
	Seed     int64
	Schedule []string
	Ops      int
	Faults   map[string]int // faults injected by kind, and what they did
	Outcomes map[string]int // batch answers by class, and reads
	Failures []string       // empty: passed
	VisPaths []string       // porcupine visualizations of failed partitions
	// Trace is the run as the seed draws it: for every step, the clients in
	// the order they started and what each sent where. Two runs of a seed
	// have the same Trace (TestReplay_SeedReplaysRun).
	Trace []string
	// History is the recorded history, one operation a line: calls and
	// returns on the logical time base, and answers; then every other
	// session call and its answer, and the session markers read. Two runs
	// of a seed have the same History when the scheduler's decisions
	// replayed exactly.
	History []string
	// SimTime is the simulated time the run took; Events the scheduler's
	// decisions.
	SimTime time.Duration
	Events  int64
}

type scenario struct {
	cfg      Config
	ctx      context.Context // ends at teardown
	sim      *sim
	cl       *cluster
	rec      *recorder
	rng      *rand.Rand // the harness's own draws (client order)
	schedule []event
	gens     []int  // generation of each key (changes only between steps)
	sent     []bool // key sent in its current generation
	induced  int    // reserved keys used
	clients  []*client
	obs      observations // what the store showed between steps
	// tombs: the keys whose cleaned receipt's tombstone lasts (tombs.go);
	// reborn: the generations that follow a tombstone's cleanup.
	tombs  []*keyTomb
	reborn map[keyGen]bool
	// sessions begun, by index; markerReads of their markers from outside.
	sessions    []*sessionRun
	markerReads []markerRead
	sessLog     []string // session calls other than commits, and their answers
	// damaged is the key whose value vlog-damage damaged while the damage
	// lasts (nil: none): the harness's own scans go around it.
	damaged []byte

	mu         sync.Mutex // clients report concurrently
	ops        int
	faults     map[string]int
	outcomes   map[string]int
	failures   []string
	crashNodes map[int]bool
	trace      []string

	stepNo    int    // the step running
	armed     *event // a crash failpoint still waiting to fire
	armedHits int64  // its hit count when armed
	armedStep int
}

func (sc *scenario) violate(msg string) {
	sc.mu.Lock()
	sc.failures = append(sc.failures, msg)
	sc.mu.Unlock()
}

func (sc *scenario) failed() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return len(sc.failures) > 0
}

func (sc *scenario) count(what string) {
	sc.mu.Lock()
	sc.faults[what]++
	sc.mu.Unlock()
}

func (sc *scenario) countOp(class string) {
	sc.mu.Lock()
	sc.ops++
	sc.outcomes[class]++
	sc.mu.Unlock()
}

// Run executes one scenario in a testing/synctest bubble (its time is
// simulated and its scheduler is the seed's: see sim) and checks it.
func Run(t *testing.T, cfg Config) Result {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	res := Result{Seed: cfg.Seed}
	sc := &scenario{cfg: cfg, rec: &recorder{}, schedule: makeSchedule(cfg),
		rng:  rand.New(rand.NewPCG(uint64(cfg.Seed), 0xc11e)),
		gens: make([]int, keysMax), sent: make([]bool, keysMax), tombs: make([]*keyTomb, keysMax), reborn: map[keyGen]bool{},
		faults: map[string]int{}, outcomes: map[string]int{},
		obs: observations{settled: map[keyGen]settled{}, sessions: map[int]settled{}, spent: map[keyGen]bool{}}}
	for _, e := range sc.schedule {
		res.Schedule = append(res.Schedule, e.String())
	}
	for _, b := range cfg.Bugs {
		if err := fault.Enable(b, "return(true)"); err != nil {
			res.Failures = append(res.Failures, err.Error())
			return res
		}
		defer fault.Disable(b)
	}
	var external store.Store
	if cfg.Store != nil {
		br := newBridge(cfg.Store) // here: outside the bubble
		defer br.close()
		external = br
	}
	// Table IDs come from crypto/rand: the seed's too, so that a run's
	// keys — which order the scheduler's ties — are the same every time.
	cryptotest.SetGlobalRandom(t, uint64(cfg.Seed))
	synctest.Test(t, func(*testing.T) {
		began := time.Now()
		sc.simulate(external)
		res.SimTime, res.Events = time.Since(began), sc.sim.served
	})
	// The history is checked outside the bubble: the checker's own timeout
	// is real time.
	if len(sc.failures) == 0 {
		res.VisPaths = sc.checkHistory()
	}
	res.Failures = append(res.Failures, sc.failures...)
	res.Ops, res.Faults, res.Trace = sc.ops, sc.faults, sc.trace
	res.Outcomes = sc.outcomes
	for _, op := range sc.rec.history() {
		res.History = append(res.History, fmt.Sprintf("%d %d-%d %s", op.ClientId, op.Call, op.Return, describeOp(op.Input, op.Output)))
	}
	res.History = append(res.History, sc.sessLog...)
	for _, r := range sc.markerReads {
		res.History = append(res.History, fmt.Sprintf("%d-%d read marker %s/%s -> %v", r.call, r.ret, r.ref.table, r.ref.id, r.present))
	}
	return res
}

// simulate runs the scenario inside the bubble, over external if set.
func (sc *scenario) simulate(external store.Store) {
	cfg := sc.cfg
	ctx, cancel := context.WithCancel(context.Background())
	sc.ctx = ctx
	sc.sim = newSim(uint64(cfg.Seed))
	opts := receipt.Options{
		LeaseTTL: leaseTTL, Retention: cfg.Retention, ExecutorMax: cfg.ExecutorMax,
		MaintainInterval: cfg.MaintainInterval, CleanInterval: -1, WaitPoll: tick,
		TombstoneRetention: cfg.TombstoneRetention,
		// Every client may be in flight at once: a small executor must
		// fill up (429, pending receipts), not the principal's quota.
		InflightPerPrincipalMax: cfg.Clients + cfg.SessionClients,
	}
	opts = receipt.WithTestKnobs(opts, testknobs.Receipt{DeferResolution: cfg.DeferResolution, SeparateDecide: cfg.SeparateDecide})
	if cfg.Hot && cfg.Variant == Shared {
		// Nodes on one store, as idemd's on etcd: another node's batch on
		// a hot document is re-planned (receipt/replan.go), not refused.
		opts.ReplanContended = true
	}
	if cfg.MaintainInterval > 0 {
		// A slow recovery pass, so that the cleaner meets debt outliving a
		// deadline: no early first pass either.
		opts.FirstPassMax = -1
	}
	cl, err := newCluster(sc.sim, external, cfg.nodes(), opts, cfg.Chained, uint64(cfg.Seed), cfg.Log)
	if err != nil {
		sc.violate("setup: " + err.Error())
		cancel()
		return
	}
	sc.cl = cl
	defer func() {
		// Nothing is scheduled any more: let whatever still waits run out.
		cancel()
		sc.sim.teardown()
		cl.close()
		violations, fenced := cl.audit.report()
		sc.failures = append(sc.failures, violations...)
		for kind, n := range fenced {
			sc.faults["fenced-"+kind] += n
		}
	}()
	sc.restart()
	sc.perform("setup", func(ctx context.Context) {
		if _, _, err := cl.nodes[0].svc.Tables().Create(ctx, principal, tableName, 4); err != nil {
			sc.violate("setup: " + err.Error())
		}
		if _, _, err := cl.nodes[0].svc.Tables().Create(ctx, principal, sessTable, 2); err != nil {
			sc.violate("setup: " + err.Error())
		}
	})
	for i := 0; i < cfg.Clients+cfg.SessionClients; i++ {
		c := &client{slot: i, id: sc.rec.newClient(), rng: rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(i)+1))}
		if i >= cfg.Clients {
			c.sess = &sessionClient{}
		}
		sc.clients = append(sc.clients, c)
	}
	for i := 0; i < cfg.Steps && !sc.failed(); i++ {
		sc.step(i)
	}
	if !sc.failed() {
		sc.stabilize()
	}
	if !sc.failed() {
		sc.finalOps()
		sc.perform("invariants", sc.checkInvariants)
	}
}

// maintainOnce runs a maintenance pass on node i.
func (sc *scenario) maintainOnce(ctx context.Context, i int) (receipt.MaintainStats, error) {
	return sc.cl.nodes[i].svc.MaintainOnce(ctx)
}

// node is the node an event targets.
func (sc *scenario) node(e *event) *node { return sc.cl.nodes[e.Node%len(sc.cl.nodes)] }

// perform has the harness do fn as an actor of its own while the scheduler
// drives the bubble; it waits for fn to return, at most actorTimeMax.
func (sc *scenario) perform(name string, fn func(ctx context.Context)) bool {
	a := sc.spawn(name, fn)
	if !sc.sim.run(a.done, actorTimeMax) {
		sc.violate(fmt.Sprintf("%s did not finish within %v (liveness)", name, actorTimeMax))
		return false
	}
	return true
}

// actor is something the harness has a node do, on its own goroutine.
type actor struct {
	mu       sync.Mutex
	finished bool
}

func (a *actor) done() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.finished
}

// spawn starts fn as an actor; the caller drives the bubble (sim.run).
func (sc *scenario) spawn(name string, fn func(ctx context.Context)) *actor {
	a := &actor{}
	ctx := withActor(sc.ctx, name)
	go func() {
		defer func() {
			a.mu.Lock()
			a.finished = true
			a.mu.Unlock()
		}()
		fn(ctx)
	}()
	synctest.Wait() // it runs until it first blocks: actors start in a fixed order
	return a
}

// advance lets d of simulated time pass with everything running.
func (sc *scenario) advance(d time.Duration) { sc.sim.run(nil, d) }

// step injects the step's fault and runs one operation per client, the
// clients started in an order drawn from the seed.
func (sc *scenario) step(i int) {
	sc.stepNo = i
	e := sc.schedule[i]
	spec := faultTable[e.Kind]
	if spec.arm != nil {
		spec.arm(sc, &e)
	}
	sc.count(e.Kind.String())
	sc.mu.Lock()
	sc.crashNodes = map[int]bool{}
	sc.mu.Unlock()
	live := sc.cl.live()
	var actors []*actor
	for _, slot := range sc.rng.Perm(len(sc.clients)) {
		cl := sc.clients[slot]
		n := live[cl.rng.IntN(len(live))]
		if cl.sess != nil {
			actors = append(actors, sc.sessionActor(i, slot, cl, n))
		} else {
			actors = append(actors, sc.keyedActor(i, slot, cl, n))
		}
	}
	if !sc.sim.run(func() bool { return allDone(actors) }, stepTimeMax) {
		sc.violate(fmt.Sprintf("step %d (%s): client operations did not finish within %v (liveness)", i, e, stepTimeMax))
		return
	}
	sc.clearFaults()
	sc.checkArmed(i, false)
	// Observe before anything can delete a receipt (the cleaner).
	sc.observe()
	sc.observeSessions()
	sc.checkStarted()
	if spec.disarm != nil {
		spec.disarm(sc, &e)
	}
	sc.checkArmed(i, false)
}

// sessionActor spawns step i's session leg of the client in slot, via
// node n. Its choices come from one draw, whatever they turn out to do.
func (sc *scenario) sessionActor(i, slot int, cl *client, n int) *actor {
	seed := cl.rng.Uint64()
	sc.trace = append(sc.trace, fmt.Sprintf("step %d: client %d session leg %x via node-%d", i, slot, seed, n))
	return sc.spawn(fmt.Sprintf("client-%d", slot), func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, clientTimeout)
		defer cancel()
		if crashed := sc.sessionLeg(ctx, cl, n, seed); crashed >= 0 {
			sc.markCrashed(crashed)
		}
	})
}

// keyedActor draws what the keyed client in slot does at step i — a
// batch, possibly resent, or a read — and spawns it via node n.
func (sc *scenario) keyedActor(i, slot int, cl *client, n int) *actor {
	nd := sc.cl.nodes[n]
	wantBatch := cl.rng.Float64() < 0.7
	// Reads: a counter of table t or u (d >= Docs), or — one in four —
	// a session's marker (pick chooses which).
	k, d, pick := cl.rng.IntN(sc.cfg.Keys), cl.rng.IntN(sc.counters()), cl.rng.Uint32()
	batch := wantBatch && sc.gens[k] < genMax-1
	markerRead := pick%4 == 0
	// A key its tombstone refuses is sent, half the time, with the
	// cleaned generation's batch: the very request that ran.
	resend := batch && sc.tombs[k] != nil && pick%2 == 1
	what := fmt.Sprintf("read c%d", d)
	switch {
	case resend:
		what = fmt.Sprintf("batch %s resent", keyName(k))
	case wantBatch:
		what = fmt.Sprintf("batch %s", keyName(k))
	case markerRead:
		what = fmt.Sprintf("read marker %x", pick)
	}
	sc.trace = append(sc.trace, fmt.Sprintf("step %d: client %d %s via node-%d", i, slot, what, n))
	if batch {
		sc.markSent(k)
	}
	return sc.spawn(fmt.Sprintf("client-%d", slot), func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, clientTimeout)
		defer cancel()
		switch {
		case !batch && markerRead:
			sc.doMarkerRead(ctx, nd, pick)
		case !batch:
			sc.doRead(ctx, cl, nd, d)
		case sc.sendBatch(ctx, cl, nd, k, 0, resend):
			sc.markCrashed(n)
		}
	})
}

func allDone(actors []*actor) bool {
	for _, a := range actors {
		if !a.done() {
			return false
		}
	}
	return true
}

// clean runs the retention cleaner on a live node and checks what it
// deleted (checkCleaned): a later request with a key whose receipt it
// deleted is refused while the receipt's tombstone lasts, and a new
// execution after. A cleaner stopped by an armed crash failpoint is the
// node that hit it (checkArmed).
func (sc *scenario) clean(target int) {
	live := sc.cl.live()
	if len(live) == 0 {
		return
	}
	i := live[target%len(live)]
	n := sc.cl.nodes[i]
	before := sc.beforeClean()
	sc.perform("cleaner", func(ctx context.Context) {
		if _, err := n.svc.CleanOnce(ctx); err != nil {
			sc.cl.log.Warn("harness: cleaner", "err", err)
			if errors.Is(err, fault.ErrInjected) {
				sc.mu.Lock()
				if sc.crashNodes != nil {
					sc.crashNodes[i] = true
				}
				sc.mu.Unlock()
			}
		}
	})
	sc.checkCleaned(before)
}

// receipts reads every receipt from the store.
func (sc *scenario) receipts() map[string]*receipt.Record {
	out := map[string]*receipt.Record{}
	for _, it := range sc.scanAll([]byte(store.NSReceipt)) {
		if rec, err := receipt.DecodeRecord(it.Value); err == nil {
			out[string(store.NSReceipt.Suffix(it.Key))] = rec
		}
	}
	return out
}

// stabilize clears every fault, restarts what is down, and lets time and
// maintenance run until no receipt is mutable and no transaction open.
func (sc *scenario) stabilize() {
	sc.checkArmed(sc.cfg.Steps, true)
	sc.clearFaults()
	sc.restart()
	// Time passes and the cleaner runs before recovery catches up: receipts
	// still carrying debt past their first deadline must be left alone.
	sc.advance(leaseTTL + time.Second)
	sc.clean(0)
	for round := 0; round < stabilizeRounds; round++ {
		if sc.settled() {
			return
		}
		sc.advance(leaseTTL + time.Second)
		for _, i := range sc.cl.live() {
			sc.perform("maintenance", func(ctx context.Context) {
				ms, err := sc.maintainOnce(ctx, i)
				if err != nil {
					sc.cl.log.Warn("harness: maintenance", "err", err)
				}
				sc.cl.log.Info("harness: stabilize", "round", round, "node", i, "stats", fmt.Sprintf("%+v", ms))
			})
		}
	}
	if !sc.settled() {
		sc.violate("not stable after " + fmt.Sprint(stabilizeRounds) + " recovery rounds: " + strings.Join(sc.unstable(), "; "))
	}
}

// settled lets the store calls in flight finish, then reports whether the
// system is stable.
func (sc *scenario) settled() bool {
	sc.sim.settle(actorTimeMax)
	return sc.stable()
}

// finalOps replays every key sent in its current generation and every
// session commit asked for, and reads every counter, so the history ends
// with every terminal answer on record.
func (sc *scenario) finalOps() {
	cl := &client{slot: -1, id: sc.rec.newClient()}
	live := sc.cl.live()
	var keys []int
	for k := range sc.sent {
		if sc.sent[k] {
			keys = append(keys, k)
		}
	}
	sc.perform("final", func(ctx context.Context) {
		for i, k := range keys {
			sc.doBatch(ctx, cl, sc.cl.nodes[live[i%len(live)]], k)
		}
		sc.finalCommits(ctx, cl, live)
		for d := 0; d < sc.counters(); d++ {
			sc.doRead(ctx, cl, sc.cl.nodes[live[d%len(live)]], d)
		}
	})
}
