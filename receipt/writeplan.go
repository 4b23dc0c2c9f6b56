package receipt

import (
	"strings"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/twopc"
)

// A new receipt's durable steps as data (issue 36, part 3; raft's Ready as
// the model): what was read and decided before anything is written — the
// facts — chooses its route (routeOf), and the route its plan (planOf):
// the Applies the request makes, in order, each with the failpoints before
// it and the kinds of keys it writes and conditions on. Both are pure, so
// the choice is a table test (writeplan_internal_test.go), the plan is
// held to what the store sees and to the steps the one applier,
// twopc.ApplySteps, received under the plan's names
// (writeplan_record_test.go), and every prefix of a plan is a crash to
// recover from (crashprefix_test.go). planFor adds the plans of a
// participant's no and of contention to planOf's, which commit.

// createFacts is what flow.create read or decided before its first write.
// A fact is read only when the ones before it leave the route open: a
// refused batch takes no slot, a full executor no latch.
type createFacts struct {
	refused  bool // the planner refused the batch before execution (a preflight failure)
	slotFree bool // an executor slot was free
	latched  bool // the documents' latches were taken before the wait ran out
	chains   bool // the store's batches share one log (store.Capabilities().Chain)
	direct   bool // the transaction commits without intents (twopc.Coordinator.Direct)
	// separateDecide: the test knob that writes the decision apart from
	// Begin (testknobs.Receipt.SeparateDecide).
	separateDecide bool
}

// createRoute is how a new receipt is published.
type createRoute uint8

const (
	// routeNotApplied: terminal not_applied at once (createNotApplied).
	routeNotApplied createRoute = iota + 1
	// routePending: pending with its request, for a retry or maintenance
	// to execute (createPending).
	routePending
	// routeOnce: terminal in the one write that commits the transaction
	// (createTerminal, twopc.CommitOnce).
	routeOnce
	// routeChained: started with Begin and terminal with the decision, one
	// chain of two links (createCommitted, twopc.BeginCommit).
	routeChained
	// routeBeginDecide: started with Begin, then the decision with the
	// terminal receipt, two waits (flow.begin, flow.decide).
	routeBeginDecide
)

// createRoutes lists every route, for the tests that walk them all.
var createRoutes = []createRoute{routeNotApplied, routePending, routeOnce, routeChained, routeBeginDecide}

func (r createRoute) String() string {
	switch r {
	case routeNotApplied:
		return "not_applied"
	case routePending:
		return "pending"
	case routeOnce:
		return "once"
	case routeChained:
		return "chained"
	case routeBeginDecide:
		return "begin+decide"
	}
	return "route?"
}

// routeOf is the route of a new receipt: a refusal is answered without
// executing (docs/design.md §5.5); no slot or no latch defers it as
// pending (§5.6); otherwise it executes in as few waits as the store
// allows — one write when the transaction commits directly, on any store
// (a write that is whole or absent needs no chain, and on a shared store
// the receipt's absence condition lets exactly one node's write win a key:
// docs/etcd.md, "One write per keyed request"), one chain when it chains,
// Begin then Decide otherwise, or when the test knob asks for the two
// writes apart.
func routeOf(f createFacts) createRoute {
	switch {
	case f.refused:
		return routeNotApplied
	case !f.slotFree || !f.latched:
		return routePending
	case f.separateDecide:
		return routeBeginDecide
	case f.direct:
		return routeOnce
	case !f.chains:
		return routeBeginDecide
	}
	return routeChained
}

// fallback is the route a create takes on when its route's single write
// or chain wrote nothing (a participant's no, a condition of the
// transaction's): Begin and Decide tell apart what stopped it. (A failed
// condition of the receipt's own — it exists — is answered from what the
// once write found: createTerminal.) 0 for a route that has none.
func (r createRoute) fallback() createRoute {
	if r == routeOnce || r == routeChained {
		return routeBeginDecide
	}
	return 0
}

// keyKinds is a set of kinds of keys, by namespace and role.
type keyKinds uint16

const (
	kindReceipt   keyKinds = 1 << iota // rcpt/v1/<id>
	kindTomb                           // tomb/v1/<id>: absent, for a new key
	kindClaim                          // lease/v1/claim/<id>: the fencing token
	kindLeaseTTL                       // lease/v1/ttl/<id>: the lease's expiry
	kindRecovery                       // recov/v1/<node>/<id>
	kindRetention                      // exp/v1/<deadline>/<id>
	kindTxnRecord                      // txn/v1/rec/<id>: the coordinator record
	kindDecision                       // txn/v1/dec/<id>
	kindIntent                         // intent/v1/…: prepared writes
	kindDocument                       // tbl/v1/…: documents
	kindMeta                           // meta/v1/…: a table's metadata
	kindOther                          // anything else (a test's classifier only)
)

var keyKindNames = []string{"receipt", "tomb", "claim", "lease-ttl", "recovery", "retention",
	"txn-record", "decision", "intent", "document", "meta", "other"}

func (k keyKinds) String() string {
	var out []string
	for i, n := range keyKindNames {
		if k&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return "{" + strings.Join(out, ",") + "}"
}

// planStep is one Apply (or one link of a chain) of a plan. Kinds in
// writesIf and condsIf are there only for some batches or some clocks:
// documents and intents by what the batch touches, a retention entry
// moved only when completion changes the deadline.
type planStep struct {
	name   string
	before []string // the failpoints fired before it, in order (fault/catalog.go)
	// linked: the step is the second link of the chain the step before
	// it starts (store.Chainer): sequenced with it, durable after it.
	linked bool
	// leaves is the receipt's state once the step is durable (or, when
	// it fails, as it was before it).
	leaves State
	// fails: the step writes nothing, a condition of it failing
	// (planFor's contention).
	fails            bool
	writes, writesIf keyKinds
	conds, condsIf   keyKinds
}

// writePlan is the ordered steps of one route.
type writePlan struct {
	route createRoute
	steps []planStep
}

// What the steps share: the conditions of a new receipt's publication
// (absentReceipt and, with a claim, lease.ClaimNew), its writes with a
// claim (newClaimed), what Begin conditions on (no record, no decision; a
// document's version, no open intent, the table's metadata) and what the
// terminal write drops unless resolution is deferred (terminalOps).
const (
	publishConds   = kindReceipt | kindTomb
	claimedWrites  = kindReceipt | kindClaim | kindLeaseTTL | kindRecovery | kindRetention
	txnAbsent      = kindTxnRecord | kindDecision
	docConds       = kindDocument | kindIntent | kindMeta
	terminalDrops  = kindClaim | kindLeaseTTL | kindRecovery
	terminalWrites = kindReceipt
)

// planOf is the plan of route when the transaction commits (the outcome of
// every route but not_applied and pending, which execute nothing). deferred
// is the test knob that leaves intents to maintenance (visibility debt):
// the decision then resolves nothing and the terminal receipt keeps its
// lease and recovery entry.
func planOf(route createRoute, deferred bool) writePlan {
	p := writePlan{route: route}
	switch route {
	case routeNotApplied:
		p.steps = []planStep{{name: stepPublishNotApplied, before: []string{fault.ReceiptCreateBefore}, leaves: Terminal,
			conds: publishConds, writes: kindReceipt | kindRetention}}
	case routePending:
		p.steps = []planStep{{name: stepPublishPending, before: []string{fault.ReceiptCreateBefore}, leaves: Pending,
			conds: publishConds | kindClaim, writes: claimedWrites}}
	case routeOnce:
		p.steps = []planStep{{name: twopc.StepOnce, before: []string{fault.ReceiptCreateBefore, fault.TwoPCChainBefore}, leaves: Terminal,
			conds: publishConds | txnAbsent, condsIf: docConds, writes: kindReceipt | kindRetention, writesIf: kindDocument}}
	case routeChained:
		p.steps = []planStep{beginStep(twopc.StepBeginLink, fault.TwoPCChainBefore), decideStep(deferred)}
		// Nothing can come between the links: the decision link is not
		// fenced (createCommitted), and its failpoints are the chain's.
		d := &p.steps[1]
		d.name, d.before, d.linked, d.conds, d.condsIf = twopc.StepDecideLink, nil, true, kindDecision, 0
	case routeBeginDecide:
		p.steps = []planStep{beginStep(twopc.StepBegin, fault.TwoPCBeginBefore), decideStep(deferred)}
	}
	return p
}

// beginStep publishes the started receipt under a new claim with Begin:
// the coordinator record and every participant's intents.
func beginStep(name, twopcBefore string) planStep {
	return planStep{name: name, before: []string{fault.ReceiptCreateBefore, twopcBefore}, leaves: Started,
		conds: publishConds | kindClaim | txnAbsent, condsIf: docConds,
		writes: claimedWrites | kindTxnRecord, writesIf: kindIntent}
}

// decideStep is the create-if-absent decision with the terminal receipt:
// fenced by the claim and the receipt's version when it is a write of its
// own (not in a chain, where nothing comes between), it resolves the
// intents and deletes the record unless resolution is deferred.
func decideStep(deferred bool) planStep {
	s := planStep{name: twopc.StepDecide, before: []string{fault.ReceiptDecideBefore, fault.TwoPCDecideBefore}, leaves: Terminal,
		conds: kindDecision | kindClaim | kindReceipt, writes: kindDecision | terminalWrites, writesIf: kindRetention}
	if !deferred {
		s.writes |= terminalDrops | kindTxnRecord
		s.writesIf |= kindIntent | kindDocument
		s.condsIf |= kindIntent // each intent resolved is the one prepared
	}
	return s
}

// createOutcome is what an executing route's transaction meets: planOf is
// the plan of outcomeCommitted, planFor the plan of each.
type createOutcome uint8

const (
	// outcomeCommitted: every participant votes yes, every condition holds.
	outcomeCommitted createOutcome = iota
	// outcomeRefused: a participant votes no (not contention: a real
	// conflict, a transform on a missing document). No route's staging
	// writes anything; the refusal is made durable as Begin's always is
	// (flow.refuse): the abort decision with the started receipt, then
	// the terminal receipt.
	outcomeRefused
	// outcomeContended: another writer changes a document between its
	// read and the route's write, so a condition on it fails and nothing
	// is written — at every try of a single write or chain, each staged
	// afresh (1+twopc.ChainContendedRetriesMax), which then falls back
	// (createRoute.fallback), and at the first try of a Begin, which
	// Begin itself prepares again. The fallback's writes meet none.
	outcomeContended
)

var createOutcomes = []createOutcome{outcomeCommitted, outcomeRefused, outcomeContended}

func (o createOutcome) String() string {
	return [...]string{"committed", "refused", "contended"}[o]
}

// planFor is the plan of route when its transaction meets o. Routes that
// execute nothing (not_applied, pending) meet no vote and no contention.
func planFor(route createRoute, o createOutcome, deferred bool) writePlan {
	switch {
	case o == outcomeCommitted || route == routeNotApplied || route == routePending:
		return planOf(route, deferred)
	case o == outcomeRefused:
		return writePlan{route: route, steps: refusedSteps(deferred)}
	}
	p := writePlan{route: route, steps: contendedTries(route, deferred)}
	for _, s := range planOf(routeBeginDecide, deferred).steps {
		if s.before[0] == fault.ReceiptCreateBefore {
			s.before = s.before[1:] // fired once, before the first try
		}
		p.steps = append(p.steps, s)
	}
	return p
}

// refusedSteps is the plan of a participant's "no" on every executing
// route (flow.refuse): the create-if-absent abort decision with the
// started receipt under a new claim — nothing was prepared, so nothing
// is resolved and nothing owed — then the fenced terminal receipt.
func refusedSteps(deferred bool) []planStep {
	d := planStep{name: twopc.StepDecide, before: []string{fault.ReceiptCreateBefore, fault.TwoPCDecideBefore}, leaves: Started,
		conds: publishConds | kindClaim | kindDecision, writes: claimedWrites | kindDecision}
	if !deferred {
		d.writes |= kindTxnRecord // the record's deletion, which Decide always writes
	}
	return []planStep{d, {name: stepPublishTerminal, before: []string{fault.ReceiptTerminalBefore}, leaves: Terminal,
		conds: kindClaim | kindReceipt, writes: kindReceipt | terminalDrops, writesIf: kindRetention}}
}

// contendedTries is the steps of the tries outcomeContended makes fail:
// every try of once's write or of the chain's two links, and the first
// Begin of begin+decide. Each leaves the receipt absent; the
// receipt/create-before failpoint fires before the first only.
func contendedTries(route createRoute, deferred bool) []planStep {
	plan := planOf(route, deferred).steps
	try, tries := plan[:1], 1
	if route == routeChained {
		try = plan
	}
	if route.fallback() != 0 {
		tries = 1 + twopc.ChainContendedRetriesMax
	}
	var out []planStep
	for i := range tries {
		for _, s := range try {
			s.fails, s.leaves = true, 0
			if i > 0 && len(s.before) > 0 {
				s.before = s.before[len(s.before)-1:]
			}
			out = append(out, s)
		}
	}
	return out
}
