package receipt

import (
	"sync/atomic"
	"time"

	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/twopc"
)

// attempt is one receipt that this process is advancing through its
// lifecycle (docs/design.md §4: pending → started → terminal). Every step — create,
// start, decide, publish, adopt, reconcile, pay debt — reads and updates it
// instead of taking the receipt's identity, record, version and lease as
// positional arguments. It belongs to the goroutine that holds the
// receipt's flight, so its fields need no lock.
//
// Nothing in it is specific to keyed batches: what executes a receipt
// comes from a planner, so an interactive session's commit can go through
// the same steps.
type attempt struct {
	id  string        // txn_id: the receipt's key
	rec *Record       // the receipt as stored, or as the write in flight publishes it
	fp  [32]byte      // a new receipt's fingerprint, which rec's slices (execute.go)
	ver store.Version // rec's version in the store; 0 while it is not published
	// held is this process's hold on the receipt's lease (nil: none, as for
	// a receipt created terminal).
	held *lease.Held
	// claim is what the write in flight does to the lease, and until the
	// expiry it gives it: settle uses both to account for the write.
	claim claimWrite
	until time.Time
	// parts are the participants Begin prepared (nil: resolve them from the
	// coordinator record); begun says a transaction was begun, so that a
	// deferred resolution leaves visibility debt.
	parts []twopc.Participant
	begun bool
	// holder is the live owner of another process that holds the receipt,
	// when hold found one (errNotOurs).
	holder lease.Owner
	// adoptAfter, if set, is how long past the expiry of a dead owner's
	// lease this attempt waits before it adopts (maintenance: fairness.go).
	adoptAfter func(dead string) time.Duration
	// alongside, if set, adds to the write that publishes a new receipt
	// what must happen in the same Apply — a session's commit ends the
	// session there (session_commit.go) — and published is called once
	// that write is durable.
	// cachedPlan: the transaction was planned from the table's cached
	// metadata (createFirst), so a refusal Begin meets may be the stale
	// copy's and is planned again, never published.
	cachedPlan bool
	// found is the receipt a create met instead of its absence, as the
	// failed write read it (noteFound): the next round starts from it.
	found     *Seen
	alongside func(b *store.Batch) error
	published func()
	// latches, if set, gives back the document latches a new receipt took
	// (doclatch.go), through unlatch: once, although unlatch is called
	// twice. A receipt committed in one write gives them back as soon as
	// that write is sequenced, else when create returns.
	latches   func()
	unlatched atomic.Bool
	// final is the terminal record the latest terminal write built: its
	// retention and protection are the promise of the answer it produced.
	final *Record
	// rkeys are the receipt's and its tombstone's keys (keys); the zero
	// value until first used, or as the request's lookup built them.
	rkeys receiptKeys
}

// claimWrite is what a write does to the receipt's lease claim.
type claimWrite uint8

const (
	// claimKept: the write is fenced by the claim and leaves it as it is.
	claimKept claimWrite = iota
	// claimExtended: fenced by the claim, it also sets the expiry to until.
	claimExtended
	// claimPublished: it publishes a new claim (creation, adoption); until
	// it is settled the hold is lease.Publishing.
	claimPublished
)

// fence is the key whose failed condition means the write was fenced: the
// claim, unless the write publishes it (its conditions then are races).
func (a *attempt) fence() []byte {
	if a.claim == claimPublished {
		return nil
	}
	return lease.ClaimKey(a.id)
}

// creating reports whether the receipt is not published yet: the write in
// flight creates it.
func (a *attempt) creating() bool { return a.ver == 0 }

// born is when the receipt was created (zero: not known yet), what its
// hold carries as Since for the age of the oldest mutable receipt.
func (a *attempt) born() time.Time {
	if a.rec == nil || a.rec.Created == 0 {
		return time.Time{}
	}
	return time.UnixMilli(a.rec.Created)
}

// wrote records a durable write of rec at version ver.
func (a *attempt) wrote(rec *Record, ver store.Version) { a.rec, a.ver = rec, ver }

// settle brings the hold in line with the verdict of the write in flight,
// which wrote at version ver if it is done: a published claim is confirmed,
// left unconfirmed (ambiguous) or dropped from the active set (nothing
// written); an owner's write that was fenced marks the hold lost.
func (fl *flow) settle(a *attempt, v writeVerdict, ver store.Version) {
	h := a.held
	if h == nil {
		return
	}
	switch a.claim {
	case claimPublished:
		switch v {
		case writeDone:
			h.Confirmed(ver, a.until)
			a.publishedOnce()
		case writeAmbiguous:
			h.Unconfirm()
		default:
			fl.core.active.Remove(a.id, h)
		}
		return
	case claimExtended:
		if v == writeDone {
			h.Renewed(a.until)
		}
	}
	if v == writeFenced {
		h.MarkLost()
	}
}

// publishedOnce calls a.published the first time the receipt's
// publishing write is known durable.
func (a *attempt) publishedOnce() {
	if a.published != nil && a.creating() {
		f := a.published
		a.published = nil
		f()
	}
}

// stuck answers a request whose receipt a step could not advance, by the
// verdict of what stopped it. The receipt keeps its state; a retry with
// the same key converges. The answer reports the stored state, or none
// while the receipt is being created.
func (fl *flow) stuck(a *attempt, v writeVerdict, err error) (Answer, error) {
	if a.creating() {
		return fl.stuckAs(a, 0, msgPublishUnknown, v, err)
	}
	return fl.stuckAs(a, a.rec.State, msgOutcomeUnknown, v, err)
}

// stuckAs is stuck with the state and the pending detail given.
func (fl *flow) stuckAs(a *attempt, st State, why string, v writeVerdict, err error) (Answer, error) {
	switch v {
	case writeRetry, writeDone: // (done is not stuck: look the receipt up again)
		a.noteFound(err)
		return Answer{}, errRetry
	case writeFenced:
		fl.core.stats.fenced.Add(1)
		return answerInProgress(a.id, st, fl.core.retryAfter()), nil
	case writeAmbiguous:
		return answerPending(a.id, st, why, fl.core.retryAfter()), nil
	}
	return Answer{}, err
}

// finished updates in-memory state after the receipt's terminal write: an
// immutable receipt leaves the active set and its decision can be released.
func (fl *flow) finished(a *attempt, env Envelope) {
	fl.core.countTerminal(env)
	if !fl.owesVisibility(a) {
		fl.core.active.Remove(a.id, a.held)
		fl.retain.queueRelease(a.id)
	}
}

// owesVisibility reports whether the attempt's terminal write leaves
// visibility debt: intents of a begun transaction whose resolution is
// deferred to maintenance.
func (fl *flow) owesVisibility(a *attempt) bool { return a.begun && fl.core.opts.knobs.DeferResolution }

// applied settles the write in flight, which ended with err (at version
// ver if it is durable), and unless it is done answers the request by its
// verdict: ok reports a durable write.
func (fl *flow) applied(a *attempt, ver store.Version, err error) (ok bool, ans Answer, rerr error) {
	v := classifyWrite(err, a.fence())
	fl.settle(a, v, ver)
	if v == writeDone {
		return true, Answer{}, nil
	}
	ans, rerr = fl.stuck(a, v, err)
	return false, ans, rerr
}

// notDone is applied for a write in flight that ended with err != nil
// without being durable — the error of its store call, or of the
// failpoint that stands for it.
func (fl *flow) notDone(a *attempt, err error) (Answer, error) {
	_, ans, err := fl.applied(a, 0, err)
	return ans, err
}

// unlatch gives back the latches a.latches holds, the first time it is
// called: by the store as the one write is sequenced (store.OnSequenced,
// from Apply, which may run more than once) and by create as it returns.
// sync.OnceFunc did the same in two allocations a keyed request; the
// method value handed to the store is one.
func (a *attempt) unlatch() {
	if a.unlatched.CompareAndSwap(false, true) {
		a.latches()
	}
}
