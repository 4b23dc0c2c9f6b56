package receipt

import (
	"reflect"
	"slices"
	"testing"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/twopc"
)

// fact is one fact of a routeOf rule: nil matches either value.
type fact *bool

var yes, no = fact(new(bool)), fact(new(bool))

func init() { *yes = true }

// routeRules are the routes as the design states them, most binding
// first, each a pattern over the facts; every combination of facts must
// match exactly one.
var routeRules = []struct {
	refused, slotFree, latched, chains, separateDecide, direct fact
	want                                                       createRoute
}{
	{refused: yes, want: routeNotApplied},
	{refused: no, slotFree: no, want: routePending},
	{refused: no, slotFree: yes, latched: no, want: routePending},
	{refused: no, slotFree: yes, latched: yes, separateDecide: yes, want: routeBeginDecide},
	// One write needs no chain: whole or absent on any store (issue 39).
	{refused: no, slotFree: yes, latched: yes, separateDecide: no, direct: yes, want: routeOnce},
	{refused: no, slotFree: yes, latched: yes, chains: no, separateDecide: no, direct: no, want: routeBeginDecide},
	{refused: no, slotFree: yes, latched: yes, chains: yes, separateDecide: no, direct: no, want: routeChained},
}

func matches(p fact, v bool) bool { return p == nil || *p == v }

// TestRouteOf_EveryCombinationOfFacts walks all 64 combinations of the
// facts a create reads: each matches one rule, whose route routeOf gives.
func TestRouteOf_EveryCombinationOfFacts(t *testing.T) {
	seen := map[createRoute]int{}
	for bits := range 1 << 6 {
		f := createFacts{refused: bits&1 != 0, slotFree: bits&2 != 0, latched: bits&4 != 0,
			chains: bits&8 != 0, separateDecide: bits&16 != 0, direct: bits&32 != 0}
		var want []createRoute
		for _, r := range routeRules {
			if matches(r.refused, f.refused) && matches(r.slotFree, f.slotFree) && matches(r.latched, f.latched) &&
				matches(r.chains, f.chains) && matches(r.separateDecide, f.separateDecide) && matches(r.direct, f.direct) {
				want = append(want, r.want)
			}
		}
		if len(want) != 1 {
			t.Fatalf("%+v matches %d rules (%v): the rules must partition the facts", f, len(want), want)
		}
		if got := routeOf(f); got != want[0] {
			t.Errorf("routeOf(%+v) = %v, want %v", f, got, want[0])
		}
		seen[want[0]]++
	}
	for _, r := range createRoutes {
		if seen[r] == 0 {
			t.Errorf("no combination of facts routes to %v", r)
		}
	}
}

// TestPlanOf_EveryRoutesPlanIsWellFormed: a plan per route, steps named
// once, failpoints from the catalog, a linked step only behind another,
// and a fallback (Begin and Decide) only for the routes of one write or
// one chain.
func TestPlanOf_EveryRoutesPlanIsWellFormed(t *testing.T) {
	catalog := map[string]bool{}
	for _, p := range fault.Catalog {
		catalog[p.Name] = true
	}
	for _, r := range createRoutes {
		for _, deferred := range []bool{false, true} {
			p := planOf(r, deferred)
			if p.route != r || len(p.steps) == 0 {
				t.Fatalf("planOf(%v, %v) = %+v", r, deferred, p)
			}
			var names []string
			for i, s := range p.steps {
				if slices.Contains(names, s.name) {
					t.Errorf("%v: step %q twice", r, s.name)
				}
				names = append(names, s.name)
				for _, fp := range s.before {
					if !catalog[fp] {
						t.Errorf("%v %s: failpoint %q is not in fault.Catalog", r, s.name, fp)
					}
				}
				if s.linked && i == 0 {
					t.Errorf("%v: the first step is linked", r)
				}
				if s.writes&s.writesIf != 0 || s.conds&s.condsIf != 0 {
					t.Errorf("%v %s: a kind both always and sometimes there", r, s.name)
				}
			}
			if s := p.steps[0]; s.before[0] != fault.ReceiptCreateBefore || s.conds&publishConds != publishConds {
				t.Errorf("%v: the first write %+v is not a create's (conditioned on the receipt's and tombstone's absence)", r, s)
			}
		}
		if fb := r.fallback(); (fb != 0) != (r == routeOnce || r == routeChained) || (fb != 0 && fb != routeBeginDecide) {
			t.Errorf("%v falls back to %v", r, fb)
		}
	}
}

// TestPlanFor_EveryOutcomesPlanIsWellFormed: for every route and outcome,
// the plan ends with the receipt terminal (pending's, which executes
// nothing, pending); the steps that fail come first and leave no receipt;
// the committed outcome is planOf's; a refusal ends in the terminal
// publish; contention ends in the fallback's (Begin and Decide) plan.
func TestPlanFor_EveryOutcomesPlanIsWellFormed(t *testing.T) {
	for _, r := range createRoutes {
		for _, o := range createOutcomes {
			for _, deferred := range []bool{false, true} {
				p := planFor(r, o, deferred)
				executes := r != routeNotApplied && r != routePending
				if o == outcomeCommitted || !executes {
					if !reflect.DeepEqual(p, planOf(r, deferred)) {
						t.Errorf("%v %v: %+v, want planOf's", r, o, p)
					}
					continue
				}
				last := p.steps[len(p.steps)-1]
				if last.leaves != Terminal || last.fails {
					t.Errorf("%v %v: the last step %+v does not leave the receipt terminal", r, o, last)
				}
				failing := true
				for _, s := range p.steps {
					if s.fails && (!failing || s.leaves != 0) {
						t.Errorf("%v %v: failing step %q after a write, or leaving a receipt", r, o, s.name)
					}
					failing = failing && s.fails
				}
				tail, names := p.steps, names(planOf(routeBeginDecide, deferred))
				if o == outcomeRefused {
					names = []string{twopc.StepDecide, stepPublishTerminal}
				}
				if tail = tail[max(0, len(tail)-len(names)):]; !slices.Equal(stepNames(tail), names) {
					t.Errorf("%v %v: ends with %q, want %q", r, o, stepNames(tail), names)
				}
				if o == outcomeContended && !p.steps[0].fails {
					t.Errorf("%v contended: the first step does not fail", r)
				}
			}
		}
	}
}

func names(p writePlan) []string { return stepNames(p.steps) }

func stepNames(steps []planStep) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.name)
	}
	return out
}
