package harness

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/store"
)

// Crashes and restarts within a scenario: arming a crash at a failpoint,
// checking that what was armed fired, and bringing the nodes back —
// recovering the store, reopening the services — as a real process
// would after a kill.

// markCrashed notes that node n was crashed during this step.
func (sc *scenario) markCrashed(n int) {
	sc.mu.Lock()
	sc.crashNodes[n] = true
	sc.mu.Unlock()
}

// clearFaults ends every store fault, pause and trigger of the live nodes.
func (sc *scenario) clearFaults() {
	for _, n := range sc.cl.nodes {
		if n.up {
			n.store.setFaults(storeFaults{})
			n.store.arm(nil)
			n.store.resume()
		}
	}
}

// armCrash arms a catalog failpoint to crash whoever hits it (one at a
// time: a crash event while one is armed injects nothing).
func (sc *scenario) armCrash(e *event) {
	if sc.armed != nil {
		*e = event{}
		return
	}
	hits := fault.Hits(e.Point)
	if err := fault.Enable(e.Point, `1*return("crash")`); err != nil {
		sc.violate(err.Error())
		return
	}
	armed := *e
	sc.armed, sc.armedHits, sc.armedStep = &armed, hits, sc.stepNo
}

// checkArmed crashes whoever hit the armed failpoint: the node a client saw
// fail at it, else the schedule's node — or the whole store for WAL and
// engine failpoints — then restarts it. A failpoint that has not fired
// within crashArmedSteps steps is disarmed.
func (sc *scenario) checkArmed(step int, final bool) {
	e := sc.armed
	if e == nil {
		if sc.cl.health() != nil {
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
	sc.count("crash-fired")
	if cleanerPoint(e.Point) {
		sc.count("crash-fired@" + e.Point)
	}
	layer := layerOf(e.Point)
	if sc.cfg.Variant == Standalone || layer == "wal" || layer == "engine" || sc.cl.health() != nil {
		sc.crashAll()
		return
	}
	sc.mu.Lock()
	targets := slices.Sorted(maps.Keys(sc.crashNodes))
	sc.mu.Unlock()
	if len(targets) == 0 {
		targets = []int{e.Node % len(sc.cl.nodes)}
	}
	for _, i := range targets {
		sc.cl.crashNode(i)
	}
	sc.restart()
}

// recoverStore restarts a store that fail-stopped, crashing whoever hit
// the armed failpoint if that is why (checkArmed).
func (sc *scenario) recoverStore() {
	if sc.cl.health() == nil {
		return
	}
	if sc.armed != nil && fault.Hits(sc.armed.Point) != sc.armedHits {
		sc.checkArmed(sc.stepNo, false)
		return
	}
	sc.crashAll()
}

// crashAll crashes the store and every node, then restarts them.
func (sc *scenario) crashAll() {
	if err := sc.cl.crashStore(nil, nil); err != nil {
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
		var err error
		if !sc.perform("restart", func(ctx context.Context) { err = sc.cl.restartDown(ctx) }) {
			return
		}
		if err == nil {
			return
		}
		if attempt >= 2 || !(errors.Is(err, fault.ErrInjected) || errors.Is(err, store.ErrFailStopped) || errors.Is(err, store.ErrAmbiguous)) {
			sc.violate("restart: " + err.Error())
			return
		}
		if sc.armed != nil {
			_ = fault.Disable(sc.armed.Point)
			sc.armed = nil
			sc.count("crash-fired")
		}
		if err := sc.cl.crashStore(nil, nil); err != nil {
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
