package harness

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/idemdb/idem/fault"
)

// faultKind is one kind of injected trouble: an index into faultTable.
type faultKind int

const (
	faultNone         faultKind = iota
	faultCrashAt                // arm a catalog failpoint; whoever hits it crashes
	faultRestart                // clean restart of a node (new incarnation)
	faultZombie                 // a paused owner comes back to write after its successor adopted
	faultTransient              // transient store errors on a node
	faultAmbiguousNew           // ambiguous receipt creation (applied or not)
	faultBareConflict           // bare decision conflicts with no readable winner
	faultTerminalFail           // the publication of a terminal receipt fails once
	faultClean                  // run the retention cleaner
	faultExpire                 // let time pass well beyond the lease TTL
	faultZombieClean            // a paused cleaner comes back to delete after another took over
	faultCkptDamage             // a power loss that damages the newest checkpoint
	faultDebtClean              // the cleaner meets a receipt whose visibility debt outlived its retention
	faultVlogDamage             // a terminal receipt's value-log record damaged under the running store, then restored
	faultKinds
)

// faultsDrawn ends the kinds a schedule draws from its main stream: the
// kinds added after them are placed by streams of their own (makeSchedule),
// so that a new kind leaves the events every seed had where they were — a
// seed's schedule only gains the new kind's events, on steps that had none.
const faultsDrawn = faultVlogDamage

// event is the fault of one step: its kind and the parameters drawn for it.
type event struct {
	Kind  faultKind
	Point string  // crash: the failpoint
	Node  int     // target node (modulo the cluster's size)
	Other int     // zombies: the successor, Node+1+Other (modulo the size)
	P     float64 // store faults: probability per call
	Wrote bool    // ambiguous create: whether the write lands
}

// faultSpec is one fault kind, described once: its name, the parameters a
// schedule draws for it (beyond Node, which every event has), how a step
// arms it before its clients run, and how it ends it after they finished
// (after the step observed the store: see scenario.step). Kinds that need
// nodes sharing a store are scheduled as a restart in the standalone
// variant, kinds that need deferred resolution as a clean without it;
// kinds that send a request of their own use one of the reserved keys
// (inducedKeys), and beyond them are scheduled as a restart; so are kinds
// that need the harness's own engine, over an external store.
type faultSpec struct {
	name     string
	params   func(rng *rand.Rand, e *event) // nil: none
	show     func(e event) string           // the parameters, for the schedule
	shared   bool                           // needs Shared
	deferred bool                           // needs Config.DeferResolution (else: a clean)
	induces  bool                           // uses a reserved key
	once     bool                           // at most once per run
	engine   bool                           // needs the harness's own engine (not Config.Store)
	arm      func(sc *scenario, e *event)   // nil: nothing
	disarm   func(sc *scenario, e *event)   // nil: nothing
}

var faultTable = [faultKinds]faultSpec{
	faultNone: {name: "none"},
	faultCrashAt: {name: "crash",
		params: func(rng *rand.Rand, e *event) { points := crashPoints(); e.Point = points[rng.IntN(len(points))] },
		show:   func(e event) string { return e.Point },
		arm:    (*scenario).armCrash, // fires and is handled by checkArmed
		disarm: (*scenario).cleanToCrash,
	},
	faultRestart: {name: "restart",
		disarm: func(sc *scenario, e *event) { sc.cl.crashNode(e.Node % len(sc.cl.nodes)); sc.restart() },
	},
	faultZombie: {name: "zombie", shared: true, induces: true,
		params: func(rng *rand.Rand, e *event) { e.Other = rng.IntN(2) },
		show:   func(e event) string { return fmt.Sprintf("successor +%d", 1+e.Other) },
		arm:    (*scenario).zombie,
	},
	faultTransient: {name: "transient", params: drawP(0.2, 0.6), show: showP,
		arm: func(sc *scenario, e *event) { sc.node(e).store.setFaults(storeFaults{transient: e.P}) },
	},
	faultAmbiguousNew: {name: "ambiguous-create",
		params: func(rng *rand.Rand, e *event) { e.P = 0.3 + 0.7*rng.Float64(); e.Wrote = rng.IntN(2) == 0 },
		show:   func(e event) string { return fmt.Sprintf("p=%.2f wrote=%v", e.P, e.Wrote) },
		arm: func(sc *scenario, e *event) {
			sc.node(e).store.setFaults(storeFaults{ambiguousNew: e.P, ambiguousWrote: e.Wrote})
		},
	},
	faultBareConflict: {name: "bare-conflict", params: drawP(0.2, 0.6), show: showP,
		arm: func(sc *scenario, e *event) { sc.node(e).store.setFaults(storeFaults{bareConflict: e.P}) },
	},
	faultTerminalFail: {name: "terminal-fail",
		arm:    func(sc *scenario, e *event) { _ = fault.Enable(fault.ReceiptTerminalBefore, `1*return("eio")`) },
		disarm: func(sc *scenario, e *event) { _ = fault.Disable(fault.ReceiptTerminalBefore) },
	},
	faultClean:  {name: "clean", disarm: func(sc *scenario, e *event) { sc.clean(e.Node) }},
	faultExpire: {name: "expire", disarm: func(sc *scenario, e *event) { sc.advance(2 * leaseTTL) }},
	faultZombieClean: {name: "zombie-clean", shared: true, induces: true,
		params: func(rng *rand.Rand, e *event) { e.Other = rng.IntN(2) },
		show:   func(e event) string { return fmt.Sprintf("successor +%d", 1+e.Other) },
		arm:    (*scenario).zombieClean,
	},
	faultCkptDamage: {name: "ckpt-damage", once: true, engine: true, disarm: (*scenario).damageCheckpoint},
	faultDebtClean: {name: "debt-clean", induces: true, deferred: true,
		params: func(rng *rand.Rand, e *event) { e.Other = rng.IntN(2) },
		show:   func(e event) string { return fmt.Sprintf("cleaner +%d", e.Other) },
		arm:    (*scenario).debtClean,
	},
	faultVlogDamage: {name: "vlog-damage", once: true, engine: true,
		params: func(rng *rand.Rand, e *event) { e.Other = rng.IntN(keysMax) },
		show:   func(e event) string { return fmt.Sprintf("pick %d", e.Other) },
		disarm: (*scenario).damageValueLog,
	},
}

func drawP(from, span float64) func(*rand.Rand, *event) {
	return func(rng *rand.Rand, e *event) { e.P = from + span*rng.Float64() }
}

func showP(e event) string { return fmt.Sprintf("p=%.2f", e.P) }

func (k faultKind) String() string { return faultTable[k].name }

func (e event) String() string {
	spec := faultTable[e.Kind]
	switch {
	case e.Kind == faultNone:
		return "-"
	case e.Kind == faultCrashAt:
		return "crash@" + e.Point
	case spec.show != nil:
		return fmt.Sprintf("%s(node-%d %s)", spec.name, e.Node, spec.show(e))
	}
	return fmt.Sprintf("%s(node-%d)", spec.name, e.Node)
}

// crashPoints are the catalog failpoints a schedule may crash at: every
// layer but the planted bugs and the maintenance pause.
func crashPoints() []string {
	var out []string
	for _, p := range fault.Catalog {
		if p.Layer == "bug" || p.Name == fault.ReceiptMaintainBefore {
			continue
		}
		out = append(out, p.Name)
	}
	return out
}

// engineLayer: a failpoint of the embedded engine's own layers, which an
// external store never passes.
func engineLayer(point string) bool {
	layer := layerOf(point)
	return layer == "wal" || layer == "engine"
}

// cleanerPoint: the failpoints only the retention cleaner passes.
func cleanerPoint(name string) bool {
	switch name {
	case fault.ReceiptCleanBefore, fault.TombCleanBefore, fault.ExpiryFoldBefore, fault.ChunkCleanBefore:
		return true
	}
	return false
}

// cleanToCrash makes a crash armed at a cleaner's failpoint meet the
// cleaner — which passes it only with something due: time passes beyond
// the receipts' retention (and, for tombstones, their keys' protection),
// then the cleaner runs; for tombstones once more if the first pass only
// made them.
func (sc *scenario) cleanToCrash(e *event) {
	if !cleanerPoint(e.Point) {
		return
	}
	if e.Point == fault.ExpiryFoldBefore || e.Point == fault.ChunkCleanBefore {
		// The fold takes entries an eighth of the retention old
		// (receipt/expfold.go); a chunk is cleaned once its receipts are due.
		sc.advance(sc.cfg.Retention/8 + time.Second)
		sc.clean(e.Node)
		if e.Point == fault.ExpiryFoldBefore || sc.armed == nil || fault.Hits(e.Point) != sc.armedHits {
			return // folded, or an earlier chunk was due and the crash fired
		}
	}
	due := sc.cfg.Retention
	if e.Point == fault.TombCleanBefore {
		due = max(due, sc.cfg.TombstoneRetention)
	}
	sc.advance(due + time.Second)
	sc.clean(e.Node)
	if e.Point == fault.TombCleanBefore && sc.armed != nil && fault.Hits(e.Point) == sc.armedHits {
		sc.clean(e.Node)
	}
}

// inducedKeys is how many keys, beyond the workload's, faults may send
// requests with (each at most once).
func (c Config) inducedKeys() int { return keysMax - c.Keys }

// makeSchedule derives a scenario's fault schedule from its seed alone:
// the same seed always yields the same schedule. The main stream draws, for
// each step, whether it has a fault and which of the kinds before
// faultsDrawn; each later kind has a stream of its own, which places it on
// the steps still without a fault at the rate every drawn kind has.
func makeSchedule(cfg Config) []event {
	out := make([]event, cfg.Steps)
	induced, used := 0, map[faultKind]bool{}
	place := func(rng *rand.Rand, e event) event {
		spec := faultTable[e.Kind]
		if spec.params != nil {
			spec.params(rng, &e)
		}
		switch {
		case spec.deferred && !cfg.DeferResolution:
			e = event{Kind: faultClean, Node: e.Node}
		case spec.shared && cfg.Variant != Shared, spec.induces && induced >= cfg.inducedKeys(),
			cfg.Store != nil && (spec.engine || engineLayer(e.Point)):
			e = event{Kind: faultRestart, Node: e.Node}
		case spec.once && used[e.Kind]:
			e = event{}
		}
		if faultTable[e.Kind].induces {
			induced++
		}
		used[e.Kind] = true
		return e
	}
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5ced))
	for i := range out {
		if rng.Float64() >= cfg.FaultRate {
			continue
		}
		e := event{Node: rng.IntN(cfg.nodes())}
		e.Kind = faultKind(1 + rng.IntN(int(faultsDrawn)-1))
		out[i] = place(rng, e)
	}
	p := cfg.FaultRate / float64(faultsDrawn-1) // a drawn kind's rate per step
	if cfg.FaultRate < 1 {
		p /= 1 - cfg.FaultRate // on the steps without a fault
	}
	for k := faultsDrawn; k < faultKinds; k++ {
		rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5ced+uint64(k)))
		for i := range out {
			if rng.Float64() >= p || out[i].Kind != faultNone {
				continue
			}
			out[i] = place(rng, event{Kind: k, Node: rng.IntN(cfg.nodes())})
		}
	}
	return out
}
