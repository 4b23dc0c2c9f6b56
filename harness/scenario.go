package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/receipt"
)

// Config describes one scenario. Everything random in it derives from Seed.
type Config struct {
	Seed      int64
	Variant   Variant
	Nodes     int     // shared variant: 2 or 3 (standalone: always 1)
	Clients   int     // concurrent clients per step
	Keys      int     // ≤ keysMax
	Docs      int     // counters
	Steps     int     // steps of the schedule
	FaultRate float64 // probability that a step injects a fault
	// ExecutorMax small values fill the executor (429, pending receipts).
	ExecutorMax int
	// Retention and MaintainInterval on the simulated clock; a retention
	// shorter than the maintenance interval leaves receipts with debt past
	// their first expiry deadline, which the cleaner must skip.
	Retention, MaintainInterval time.Duration
	// Chained gives the nodes a store that chains writes, so new receipts
	// take the default one-wait path (twopc.BeginCommit); otherwise every
	// receipt decides in a write of its own.
	Chained bool
	// Bugs arms planted-bug failpoints for the whole run (checker self-test).
	Bugs []string
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

// Scenario timing on the simulated clock.
const (
	leaseTTL        = 10 * time.Second
	tick            = 250 * time.Millisecond
	stepAdvancesMax = 2400 // ticks one step may take before it is a liveness failure
	stabilizeRounds = 12
	crashArmedSteps = 4
	stabilizeSettle = 500 * time.Millisecond
	checkTimeout    = 30 * time.Second
)

// Result is what a scenario found.
type Result struct {
	Seed     int64
	Schedule []string
	Ops      int
	Faults   map[string]int
	Outcomes map[string]int // batch answers by class, and reads
	Failures []string       // empty: passed
	VisPaths []string       // porcupine visualizations of failed partitions
}

type scenario struct {
	cfg      Config
	cl       *cluster
	rec      *recorder
	schedule []event
	gens     []int  // generation of each key (changes only between steps)
	sent     []bool // key sent in its current generation
	clients  []*client
	ops      atomic.Int64
	faults   map[string]int
	outcomes [4]atomic.Int64 // unknown, committed, not applied, reads

	mu         sync.Mutex
	failures   []string
	crashNodes map[int]bool

	obs observations // what the store showed between steps

	armed     *event // a crash failpoint still waiting to fire
	armedHits int64  // its hit count when armed
	armedStep int
}

func (sc *scenario) violate(msg string) {
	sc.mu.Lock()
	sc.failures = append(sc.failures, msg)
	sc.mu.Unlock()
}

func (sc *scenario) countOp(c outClass) {
	sc.ops.Add(1)
	sc.outcomes[c].Add(1)
}

// Run executes one scenario and checks it.
func Run(cfg Config) Result {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	sc := &scenario{cfg: cfg, rec: &recorder{}, schedule: makeSchedule(cfg),
		gens: make([]int, cfg.Keys), sent: make([]bool, cfg.Keys), faults: map[string]int{},
		obs: observations{settled: map[keyGen]settled{}}}
	res := Result{Seed: cfg.Seed}
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
	opts := receipt.Options{
		LeaseTTL: leaseTTL, Retention: cfg.Retention, ExecutorMax: cfg.ExecutorMax,
		MaintainInterval: cfg.MaintainInterval, CleanInterval: -1, WaitPoll: tick,
	}
	if cfg.MaintainInterval > 0 {
		// A slow recovery pass, so that the cleaner meets debt outliving a
		// deadline: no early first pass either.
		opts.FirstPassMax = -1
	}
	cl, err := newCluster(cfg.nodes(), opts, cfg.Chained, uint64(cfg.Seed), cfg.Log)
	if err != nil {
		res.Failures = append(res.Failures, "setup: "+err.Error())
		return res
	}
	sc.cl = cl
	defer cl.close()
	if _, _, err := cl.nodes[0].svc.Tables().Create(context.Background(), principal, tableName, 4); err != nil {
		res.Failures = append(res.Failures, "setup: "+err.Error())
		return res
	}
	for i := 0; i < cfg.Clients; i++ {
		sc.clients = append(sc.clients, &client{id: sc.rec.newClient(),
			rng: rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(i)+1))})
	}
	for i := 0; i < cfg.Steps && len(sc.failures) == 0; i++ {
		sc.step(i)
	}
	if len(sc.failures) == 0 {
		sc.stabilize()
	}
	if len(sc.failures) == 0 {
		sc.finalOps()
		sc.checkInvariants()
		res.VisPaths = sc.checkHistory()
	}
	res.Failures = append(res.Failures, sc.failures...)
	res.Failures = append(res.Failures, cl.obs.list()...)
	res.Ops = int(sc.ops.Load())
	res.Faults = sc.faults
	res.Outcomes = map[string]int{"unknown": int(sc.outcomes[outUnknown].Load()),
		"committed": int(sc.outcomes[outCommitted].Load()), "not-applied": int(sc.outcomes[outNotApplied].Load()),
		"reads": int(sc.outcomes[3].Load())}
	return res
}

// step injects the step's fault and runs one operation per client.
func (sc *scenario) step(i int) {
	e := sc.schedule[i]
	if e.Kind == faultCrashAt && sc.armed != nil {
		e = event{} // one crash failpoint at a time
	}
	sc.faults[e.Kind.String()]++
	hits := sc.arm(e)
	if e.Kind == faultCrashAt {
		sc.armed, sc.armedHits, sc.armedStep = &e, hits, i
	}
	sc.crashNodes = map[int]bool{}
	live := sc.cl.live()
	var wg sync.WaitGroup
	for _, cl := range sc.clients {
		n := live[cl.rng.IntN(len(live))]
		wantBatch := cl.rng.Float64() < 0.7
		k, d := cl.rng.IntN(sc.cfg.Keys), cl.rng.IntN(sc.cfg.Docs)
		wg.Add(1)
		go func(cl *client, n int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			nd := sc.cl.nodes[n]
			if !wantBatch || sc.gens[k] >= genMax-1 {
				sc.doRead(ctx, cl, nd, d)
				return
			}
			if sc.doBatch(ctx, cl, nd, k) {
				sc.mu.Lock()
				sc.crashNodes[n] = true
				sc.mu.Unlock()
			}
		}(cl, n)
		if wantBatch {
			sc.sent[k] = true
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if e.Kind == faultZombie {
		// The paused node's lease runs out while the others carry on.
		sc.advance(leaseTTL + 2*time.Second)
		sc.cl.nodes[e.Node].store.resume()
	}
	if !sc.waitAdvancing(done) {
		sc.violate(fmt.Sprintf("step %d (%s): client operations did not finish (liveness)", i, e))
		return
	}
	sc.disarm(e, hits)
	sc.checkArmed(i, false)
	// Observe before anything can delete a receipt (the cleaner below).
	sc.observe()
	sc.checkStarted()
	if e.Kind == faultExpire {
		sc.advance(2 * leaseTTL)
	}
	if e.Kind == faultClean {
		sc.clean()
		sc.checkArmed(i, false)
	}
}

// arm injects e; it returns the failpoint's hit count before arming.
func (sc *scenario) arm(e event) int64 {
	n := sc.cl.nodes[e.Node%len(sc.cl.nodes)]
	switch e.Kind {
	case faultCrashAt:
		before := fault.Hits(e.Point)
		if err := fault.Enable(e.Point, `1*return("crash")`); err != nil {
			sc.violate(err.Error())
		}
		return before
	case faultTerminalFail:
		before := fault.Hits(fault.ReceiptTerminalBefore)
		_ = fault.Enable(fault.ReceiptTerminalBefore, `1*return("eio")`)
		return before
	case faultTransient:
		n.store.setFaults(storeFaults{transient: e.P})
	case faultAmbiguousNew:
		n.store.setFaults(storeFaults{ambiguousNew: e.P, ambiguousWrote: e.Wrote})
	case faultBareConflict:
		n.store.setFaults(storeFaults{bareConflict: e.P})
	case faultZombie:
		n.store.pause()
	}
	return 0
}

// disarm ends e; a crash failpoint that fired crashes the node that hit it
// (or, when no client saw it fire, one chosen by the schedule's node) — or
// the whole store for WAL and engine failpoints — and restarts it.
func (sc *scenario) disarm(e event, hitsBefore int64) {
	for _, n := range sc.cl.nodes {
		if n.up {
			n.store.setFaults(storeFaults{})
			n.store.resume()
		}
	}
	switch e.Kind {
	case faultTerminalFail:
		_ = fault.Disable(fault.ReceiptTerminalBefore)
	case faultRestart:
		sc.cl.crashNode(e.Node % len(sc.cl.nodes))
		sc.restart()
	}
}

// checkArmed crashes whoever hit the armed failpoint: the node a client saw
// fail at it, else the schedule's node — or the whole store for WAL and
// engine failpoints — then restarts it. A failpoint that has not fired
// within crashArmedSteps steps is disarmed.
func (sc *scenario) checkArmed(step int, final bool) {
	e := sc.armed
	if e == nil {
		if sc.cl.db.Health() != nil {
			// The store fail-stopped (a failure injected elsewhere, e.g. a
			// failed publication while a WAL write was in flight): like an
			// operator, restart the process on the same data dir.
			sc.crashAll()
		}
		return
	}
	if fault.Hits(e.Point) == sc.armedHits {
		if final || step-sc.armedStep >= crashArmedSteps {
			_ = fault.Disable(e.Point)
			sc.armed = nil
		}
		return
	}
	_ = fault.Disable(e.Point)
	sc.armed = nil
	sc.faults["crash-fired"]++
	layer := layerOf(e.Point)
	if sc.cfg.Variant == Standalone || layer == "wal" || layer == "engine" || sc.cl.db.Health() != nil {
		sc.crashAll()
		return
	} else {
		targets := sc.crashNodes
		if len(targets) == 0 {
			targets = map[int]bool{e.Node % len(sc.cl.nodes): true}
		}
		for i := range targets {
			sc.cl.crashNode(i)
		}
	}
	sc.restart()
}

// crashAll crashes the store and every node, then restarts them.
func (sc *scenario) crashAll() {
	if err := sc.cl.crashStore(); err != nil {
		sc.violate("crash and reopen of the store: " + err.Error())
		return
	}
	sc.restart()
}

// restart brings every node that is down back up. Starting a node writes
// (its new incarnation), so an armed WAL failpoint can fail the start and
// the engine with it: then the whole store crashes and restarts — the same
// fault, hit a moment later.
func (sc *scenario) restart() {
	for attempt := 0; ; attempt++ {
		err := sc.cl.restartDown()
		if err == nil {
			return
		}
		if attempt >= 2 || !(errors.Is(err, fault.ErrInjected) || errors.Is(err, engine.ErrFailStopped) || errors.Is(err, engine.ErrAmbiguous)) {
			sc.violate("restart: " + err.Error())
			return
		}
		if sc.armed != nil {
			_ = fault.Disable(sc.armed.Point)
			sc.armed = nil
			sc.faults["crash-fired"]++
		}
		if err := sc.cl.crashStore(); err != nil {
			sc.violate("crash and reopen of the store: " + err.Error())
			return
		}
	}
}

func layerOf(name string) string {
	for _, p := range fault.Catalog {
		if p.Name == name {
			return p.Layer
		}
	}
	return ""
}

// advance moves the simulated clock by d in ticks, letting the background
// loops run between ticks.
func (sc *scenario) advance(d time.Duration) {
	for t := time.Duration(0); t < d; t += tick {
		sc.cl.clock.Advance(tick)
		runtime.Gosched() // let timer goroutines run
	}
}

// waitAdvancing waits for done, advancing the simulated clock while
// operations are parked on it (renewal backoff, waits); false means the
// operations did not finish within stepAdvancesMax ticks.
func (sc *scenario) waitAdvancing(done <-chan struct{}) bool {
	for i := 0; i < stepAdvancesMax; i++ {
		select {
		case <-done:
			return true
		case <-time.After(2 * time.Millisecond):
		}
		sc.cl.clock.Advance(tick)
	}
	select {
	case <-done:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

// clean runs the retention cleaner on a live node, then gives every key
// whose receipt it deleted a new generation: a later request with the same
// key is a new execution.
func (sc *scenario) clean() {
	live := sc.cl.live()
	n := sc.cl.nodes[live[0]]
	if _, err := n.svc.CleanOnce(context.Background()); err != nil {
		sc.cl.log.Warn("harness: cleaner", "err", err)
	}
	for k := 0; k < sc.cfg.Keys; k++ {
		if !sc.sent[k] {
			continue
		}
		if _, err := sc.cl.db.Get(context.Background(), receiptKey(k)); err != nil {
			sc.gens[k]++
			sc.sent[k] = false
			sc.faults["cleaned-keys"]++
		}
	}
}

// stabilize clears every fault, restarts what is down, and lets time and
// maintenance run until no receipt is mutable and no transaction open.
func (sc *scenario) stabilize() {
	sc.checkArmed(sc.cfg.Steps, true)
	for _, n := range sc.cl.nodes {
		if n.up {
			n.store.setFaults(storeFaults{})
			n.store.resume()
		}
	}
	sc.restart()
	// Time passes and the cleaner runs before recovery catches up: receipts
	// still carrying debt past their first deadline must be left alone.
	sc.advance(leaseTTL + time.Second)
	sc.clean()
	for round := 0; round < stabilizeRounds; round++ {
		if sc.settle(stabilizeSettle) {
			return
		}
		sc.advance(leaseTTL + time.Second)
		for _, i := range sc.cl.live() {
			ms, err := sc.cl.nodes[i].svc.MaintainOnce(context.Background())
			if err != nil {
				sc.cl.log.Warn("harness: maintenance", "err", err)
			}
			sc.cl.log.Info("harness: stabilize", "round", round, "node", i, "stats", fmt.Sprintf("%+v", ms))
		}
	}
	if sc.settle(stabilizeSettle) {
		return
	}
	if !sc.stable() {
		if os.Getenv("HARNESS_STACKS") != "" {
			buf := make([]byte, 1<<22)
			os.Stderr.Write(buf[:runtime.Stack(buf, true)])
		}
		sc.violate("not stable after " + fmt.Sprint(stabilizeRounds) + " recovery rounds: " + strings.Join(sc.unstable(), "; "))
	}
}

// settle polls, for up to d of real time, for background work already under
// way (a maintenance loop mid-execution) to make the system stable.
func (sc *scenario) settle(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if sc.stable() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		<-time.After(5 * time.Millisecond)
	}
}

// finalOps replays every key sent in its current generation and reads every
// counter, so the history ends with every terminal answer on record.
func (sc *scenario) finalOps() {
	ctx := context.Background()
	cl := &client{id: sc.rec.newClient()}
	live := sc.cl.live()
	keys := make([]int, 0, sc.cfg.Keys)
	for k := range sc.sent {
		if sc.sent[k] {
			keys = append(keys, k)
		}
	}
	sort.Ints(keys)
	for i, k := range keys {
		sc.doBatch(ctx, cl, sc.cl.nodes[live[i%len(live)]], k)
	}
	for d := 0; d < sc.cfg.Docs; d++ {
		sc.doRead(ctx, cl, sc.cl.nodes[live[d%len(live)]], d)
	}
}
