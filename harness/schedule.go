package harness

import (
	"fmt"
	"math/rand/v2"

	"github.com/idemdb/idem/fault"
)

// faultKind is one kind of injected trouble.
type faultKind int

const (
	faultNone         faultKind = iota
	faultCrashAt                // arm a catalog failpoint; whoever hits it crashes
	faultRestart                // clean restart of a node (new incarnation)
	faultZombie                 // pause a node past its lease, let others adopt, wake it
	faultTransient              // transient store errors on a node
	faultAmbiguousNew           // ambiguous receipt creation (applied or not)
	faultBareConflict           // bare decision conflicts with no readable winner
	faultTerminalFail           // the publication of a terminal receipt fails once
	faultClean                  // run the retention cleaner
	faultExpire                 // let time pass well beyond the lease TTL
	faultKinds
)

var faultNames = [...]string{"none", "crash", "restart", "zombie", "transient", "ambiguous-create",
	"bare-conflict", "terminal-fail", "clean", "expire"}

func (k faultKind) String() string { return faultNames[k] }

// event is the fault of one step.
type event struct {
	Kind  faultKind
	Point string  // failpoint (crash)
	Node  int     // target node
	P     float64 // probability (store faults)
	Wrote bool    // ambiguous create: whether the write lands
}

func (e event) String() string {
	switch e.Kind {
	case faultNone:
		return "-"
	case faultCrashAt:
		return fmt.Sprintf("crash@%s", e.Point)
	case faultTransient, faultBareConflict:
		return fmt.Sprintf("%s(node-%d p=%.2f)", e.Kind, e.Node, e.P)
	case faultAmbiguousNew:
		return fmt.Sprintf("%s(node-%d p=%.2f wrote=%v)", e.Kind, e.Node, e.P, e.Wrote)
	}
	return fmt.Sprintf("%s(node-%d)", e.Kind, e.Node)
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

// makeSchedule derives a scenario's fault schedule from its seed alone:
// the same seed always yields the same schedule.
func makeSchedule(cfg Config) []event {
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5ced))
	points := crashPoints()
	out := make([]event, cfg.Steps)
	for i := range out {
		if rng.Float64() >= cfg.FaultRate {
			continue
		}
		e := event{Node: rng.IntN(cfg.nodes())}
		e.Kind = faultKind(1 + rng.IntN(int(faultKinds)-1))
		switch e.Kind {
		case faultCrashAt:
			e.Point = points[rng.IntN(len(points))]
		case faultZombie:
			if cfg.Variant != Shared {
				e.Kind = faultRestart
			}
		case faultTransient, faultBareConflict:
			e.P = 0.2 + 0.6*rng.Float64()
		case faultAmbiguousNew:
			e.P = 0.3 + 0.7*rng.Float64()
			e.Wrote = rng.IntN(2) == 0
		}
		out[i] = e
	}
	return out
}
