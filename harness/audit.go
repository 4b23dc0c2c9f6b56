package harness

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// auditor judges every write that lands against the fencing rules of
// docs/design.md §4 and §7, from durable state: it reads what a write touches just
// before and just after it (one audited write at a time, so nothing comes
// between), and flags
//
//   - a stale owner's write: a write to a receipt, its expiry or its claim
//     by anyone but the claim's holder (terminal, started, renewal,
//     release), or to an immutable receipt;
//   - an adoption that did not bump the epoch, or took a live lease (one
//     neither expired nor held by an older incarnation of the adopter);
//   - a cleanup that deleted a receipt with debt (not terminal, or
//     terminal with visibility debt), one whose retention had not ended, or
//     one deleted by a cleaner that no longer held the cleaner's job lease;
//   - tombstones (judgeTomb): a cleanup of a receipt protected beyond its
//     retention that did not write, in the same batch, the tombstone its
//     record promises (outcome, fingerprint, completion, ProtectUntil), or
//     wrote one it does not promise; a tombstone deleted before its
//     ProtectUntil or by a cleaner that no longer held the job lease; a
//     receipt created while its tombstone exists, or ever beside it;
//   - for interactive sessions (judgeSession), which share the lease
//     records: a write to an open session by anyone but its claim's holder
//     — except the ending of one whose lease anyone may take (presumed
//     aborted: expired, or an older incarnation's) — a write to an ended
//     session, an ending that leaves its lease or open entry behind, a
//     commit without its receipt, and a cleanup of a session that is open
//     or retained.
//
// Writes that fail on a fence (a stale owner's claim, an adopter's CAS, a
// stale cleaner's job lease) are counted by kind: the zombie choreographies
// must make stale owners attempt each kind, and these counts show they did.
type auditor struct {
	store store.Store // the engine itself: reads bypass the gate

	mu         sync.Mutex
	jobs       map[string]lease.Owner // job lease -> who last acquired it
	rewrites   map[string]int         // receipt -> landed writes of its record
	violations []string
	fenced     map[string]int // stale writes refused, by kind
}

func newAuditor(st store.Store) *auditor {
	return &auditor{store: st, jobs: map[string]lease.Owner{}, rewrites: map[string]int{}, fenced: map[string]int{}}
}

// rewritten returns how many writes of each receipt's record landed so far.
func (a *auditor) rewritten() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.rewrites)
}

// receiptState is what the auditor reads of one receipt.
type receiptState struct {
	rcpt    []byte // nil: absent
	rec     *receipt.Record
	lease   lease.State
	expires []byte
	tomb    []byte // nil: absent
	tombVal tombVal
	tombOK  bool // tombVal decoded
	// A session: its record and whether its open entry exists.
	sess     []byte // nil: absent
	sessRec  *receipt.SessionRecord
	sessOpen bool
}

var (
	sessionRecPrefix  = store.NSSession.Key("rec", "")
	sessionOpenPrefix = store.NSSession.Key("open", "")
)

// write runs apply (the write of batches by owner w) between two reads of
// what it touches, and judges it if it landed.
func (a *auditor) write(ctx context.Context, w lease.Owner, batches []*store.Batch, apply func() error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := touched(batches)
	pre := a.read(ids)
	err := apply()
	if w.Node == "" {
		return err // an incarnation still registering writes no receipt
	}
	switch key, refused := store.FailedKey(err); {
	case err == nil:
		a.judge(w, batches, ids, pre, a.read(ids))
		if preparesOrDecides(batches) {
			a.probeReads(context.Background())
		}
		for _, b := range batches {
			for _, op := range b.Ops {
				if job, ok := bytes.CutPrefix(op.Key, lease.JobKey("")); ok && !op.Delete {
					a.jobs[string(job)] = w
				}
				if id, ok := bytes.CutPrefix(op.Key, []byte(store.NSReceipt)); ok && !op.Delete {
					a.rewrites[string(id)]++
				}
			}
		}
	case refused:
		a.refused(w, batches, ids, pre, key)
	}
	return err
}

// touched lists the receipts whose record, claim or expiry batches write.
func touched(batches []*store.Batch) []string {
	seen := map[string]bool{}
	for _, b := range batches {
		for _, op := range b.Ops {
			for _, prefix := range [][]byte{[]byte(store.NSReceipt), lease.ClaimKey(""), lease.ExpiryKey(""), sessionRecPrefix, sessionOpenPrefix} {
				if id, ok := bytes.CutPrefix(op.Key, prefix); ok {
					seen[string(id)] = true
				}
			}
			if raw, ok := bytes.CutPrefix(op.Key, []byte(store.NSTomb)); ok {
				seen[hex.EncodeToString(raw)] = true
			}
		}
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (a *auditor) read(ids []string) map[string]receiptState {
	ctx := context.Background()
	out := make(map[string]receiptState, len(ids))
	for _, id := range ids {
		var st receiptState
		if it, err := a.store.Get(ctx, store.NSReceipt.Key(id)); err == nil {
			st.rcpt = it.Value
			st.rec, _ = receipt.DecodeRecord(it.Value)
		}
		st.lease, _ = lease.Read(ctx, a.store, id)
		if it, err := a.store.Get(ctx, lease.ExpiryKey(id)); err == nil {
			st.expires = it.Value
		}
		if k := tombKeyOf(id); k != nil {
			if it, err := a.store.Get(ctx, k); err == nil {
				st.tomb = it.Value
				st.tombVal, st.tombOK = decodeTombVal(it.Value)
			}
		}
		if lease.KindOf(id) == lease.KindSession {
			if it, err := a.store.Get(ctx, store.NSSession.Key("rec", id)); err == nil {
				st.sess = it.Value
				st.sessRec, _ = receipt.DecodeSession(it.Value)
			}
			_, err := a.store.Get(ctx, store.NSSession.Key("open", id))
			st.sessOpen = err == nil
		}
		out[id] = st
	}
	return out
}

// kindOf names what batches do to receipt id.
func kindOf(batches []*store.Batch, id string, pre receiptState) string {
	var putRcpt, delRcpt, putClaim, casClaim, putTTL, drop, delTomb bool
	var rec *receipt.Record
	for _, b := range batches {
		for _, c := range b.Conds {
			casClaim = casClaim || (c.Kind == store.MustBeAtVersion && bytes.Equal(c.Key, lease.ClaimKey(id)))
		}
		for _, op := range b.Ops {
			switch k := op.Key; {
			case bytes.Equal(k, store.NSReceipt.Key(id)):
				if op.Delete {
					delRcpt = true
				} else {
					putRcpt = true
					rec, _ = receipt.DecodeRecord(op.Value)
				}
			case bytes.Equal(k, lease.ClaimKey(id)):
				putClaim, drop = putClaim || !op.Delete, drop || op.Delete
			case bytes.Equal(k, lease.ExpiryKey(id)):
				putTTL = putTTL || !op.Delete
			case bytes.Equal(k, tombKeyOf(id)):
				delTomb = delTomb || op.Delete
			}
		}
	}
	switch {
	case delRcpt && !putRcpt:
		return "cleanup"
	case delTomb && !putRcpt:
		return "tomb-cleanup"
	case putClaim && (casClaim || pre.lease.ClaimVersion != 0):
		return "adoption"
	case putClaim || (putRcpt && pre.rcpt == nil):
		return "create"
	case putRcpt && rec != nil && rec.State == receipt.Terminal:
		if pre.rec != nil && pre.rec.State == receipt.Terminal {
			return "debt-paid"
		}
		return "terminal"
	case putRcpt:
		return "receipt-write"
	case putTTL:
		return "renewal"
	case drop:
		return "release"
	}
	return "other"
}

// judge flags what a landed write must not have done.
func (a *auditor) judge(w lease.Owner, batches []*store.Batch, ids []string, pre, post map[string]receiptState) {
	now := time.Now()
	for _, id := range ids {
		p, q := pre[id], post[id]
		if lease.KindOf(id) == lease.KindSession {
			a.judgeSession(w, id, p, q, now)
			continue
		}
		kind := kindOf(batches, id, p)
		bad := func(format string, args ...any) {
			a.violations = append(a.violations, fmt.Sprintf("%s by %s on receipt %s: ", kind, w, id)+fmt.Sprintf(format, args...))
		}
		a.judgeTomb(bad, w, id, p, q, now)
		if p.rcpt != nil && q.rcpt == nil {
			switch {
			case p.rec == nil:
				bad("deleted an undecodable receipt")
			case p.rec.State != receipt.Terminal || p.rec.Debt != 0:
				bad("deleted a receipt with debt (state %s, debt %d)", p.rec.State, p.rec.Debt)
			case p.rec.RetainUntil > now.UnixMilli():
				bad("deleted a receipt %v before its retention ended", time.UnixMilli(p.rec.RetainUntil).Sub(now))
			}
			if holder, ok := a.jobs["cleaner"]; ok && holder != w {
				bad("the cleaner's job lease is held by %s: a stale cleaner's delete landed", holder)
			}
			continue
		}
		if p.lease.ClaimVersion != 0 {
			if q.lease.ClaimVersion != 0 && q.lease.ClaimVersion != p.lease.ClaimVersion {
				// The claim was rewritten: an adoption.
				if q.lease.Claim.Epoch <= p.lease.Claim.Epoch {
					bad("adopted without bumping the epoch (%d to %d)", p.lease.Claim.Epoch, q.lease.Claim.Epoch)
				}
				if !q.lease.Claim.Of(w) {
					bad("wrote a claim for %s#%d", q.lease.Claim.Node, q.lease.Claim.Incarnation)
				}
				if !lease.MayAdopt(p.lease, w, now) {
					bad("took a live lease: %s#%d holds it until %v", p.lease.Claim.Node, p.lease.Claim.Incarnation, p.lease.Expires.Sub(now))
				}
				continue
			}
			if !p.lease.Claim.Of(w) {
				bad("a stale owner's write landed: %s#%d epoch %d holds the receipt", p.lease.Claim.Node, p.lease.Claim.Incarnation, p.lease.Claim.Epoch)
			}
			continue
		}
		// No claim before: a creation, or a write to an immutable receipt.
		if p.rcpt != nil && !bytes.Equal(p.rcpt, q.rcpt) {
			bad("rewrote an immutable receipt")
		}
		if q.lease.ClaimVersion != 0 && (p.rcpt != nil || !q.lease.Claim.Of(w)) {
			bad("claimed a receipt it did not create (claim %s#%d)", q.lease.Claim.Node, q.lease.Claim.Incarnation)
		}
		if q.lease.ClaimVersion == 0 && !bytes.Equal(p.expires, q.expires) && q.expires != nil {
			bad("wrote the lease expiry of a receipt nobody holds")
		}
	}
}

// refused counts a stale write that a fence stopped.
func (a *auditor) refused(w lease.Owner, batches []*store.Batch, ids []string, pre map[string]receiptState, key []byte) {
	if bytes.Equal(key, lease.JobKey("cleaner")) {
		if holder, ok := a.jobs["cleaner"]; ok && holder != w {
			a.fenced[cleanupKind(batches)]++
		}
		return
	}
	for _, id := range ids {
		p := pre[id]
		if lease.KindOf(id) == lease.KindSession {
			// A step, an ending or a renewal refused on the session's
			// record or claim: it moved on without this writer.
			if bytes.Equal(key, lease.ClaimKey(id)) || bytes.Equal(key, lease.ExpiryKey(id)) || bytes.Equal(key, store.NSSession.Key("rec", id)) {
				a.fenced["session"]++
			}
			continue
		}
		kind := kindOf(batches, id, p)
		switch {
		case kind == "adoption" && (bytes.Equal(key, lease.ClaimKey(id)) || bytes.Equal(key, lease.ExpiryKey(id)) || bytes.Equal(key, store.NSReceipt.Key(id))):
			a.fenced[kind]++
		case bytes.Equal(key, lease.ClaimKey(id)) && (p.lease.ClaimVersion == 0 || !p.lease.Claim.Of(w)):
			a.fenced[kind]++
		}
	}
}

// cleanupKind tells a cleaner's batch that deletes tombstones only from
// one that deletes receipts (or sessions).
func cleanupKind(batches []*store.Batch) string {
	kind := "cleanup"
	for _, b := range batches {
		for _, op := range b.Ops {
			switch {
			case op.Delete && store.NSTomb.Has(op.Key):
				kind = "tomb-cleanup"
			case store.NSReceipt.Has(op.Key), store.NSSession.Has(op.Key):
				return "cleanup"
			}
		}
	}
	return kind
}

// judgeTomb flags what a landed write must not have done to receipt id's
// tombstone. Every receipt the harness writes carries ProtectUntil, so
// its record alone says whether its cleanup owes a tombstone.
func (a *auditor) judgeTomb(bad func(string, ...any), w lease.Owner, id string, p, q receiptState, now time.Time) {
	switch {
	case p.rcpt == nil && q.rcpt != nil && p.tomb != nil:
		bad("created a receipt while its tombstone exists: an expired key executed again")
	case q.rcpt != nil && q.tomb != nil:
		bad("left a receipt beside its tombstone")
	case p.rcpt != nil && q.rcpt == nil && p.rec != nil && p.rec.State == receipt.Terminal:
		r := p.rec
		switch owed := r.ProtectUntil > r.RetainUntil; {
		case !owed && q.tomb != nil:
			bad("left a tombstone, though the receipt is protected no longer than retained")
		case !owed:
		case q.tomb == nil:
			bad("deleted a receipt protected %v beyond its retention without writing its tombstone in the same batch", time.Duration(r.ProtectUntil-r.RetainUntil)*time.Millisecond)
		case !q.tombOK:
			bad("wrote an undecodable tombstone")
		case q.tombVal.outcome != receipt.EnvelopeOf(r, id).Outcome || q.tombVal.completed != r.Completed ||
			q.tombVal.protectUntil != r.ProtectUntil || !bytes.HasPrefix(r.Fingerprint, q.tombVal.fp[:]):
			bad("wrote tombstone %+v, but the receipt was %s, completed %d, protected until %d", q.tombVal, receipt.EnvelopeOf(r, id).Outcome, r.Completed, r.ProtectUntil)
		}
	case p.tomb == nil && q.tomb != nil:
		bad("wrote a tombstone without deleting its receipt")
	case p.tomb != nil && q.tomb == nil:
		switch {
		case !p.tombOK:
			bad("deleted an undecodable tombstone")
		case p.tombVal.protectUntil > now.UnixMilli():
			bad("deleted a tombstone %v before its protection ended", time.UnixMilli(p.tombVal.protectUntil).Sub(now))
		}
		if holder, ok := a.jobs["cleaner"]; ok && holder != w {
			bad("the cleaner's job lease is held by %s: a stale cleaner's tombstone delete landed", holder)
		}
	case p.tomb != nil && !bytes.Equal(p.tomb, q.tomb):
		bad("rewrote a tombstone")
	}
}

// judgeSession flags what a landed write must not have done to session id.
func (a *auditor) judgeSession(w lease.Owner, id string, p, q receiptState, now time.Time) {
	bad := func(kind, format string, args ...any) {
		a.violations = append(a.violations, fmt.Sprintf("session %s by %s on %s: ", kind, w, id)+fmt.Sprintf(format, args...))
	}
	holder := p.lease.ClaimVersion != 0 && p.lease.Claim.Of(w)
	switch {
	case p.sess == nil && q.sess == nil:
		return // a renewal or release of a session that never existed (an ambiguous begin)
	case p.sess != nil && p.sessRec == nil, q.sess != nil && q.sessRec == nil:
		bad("write", "an undecodable session record")
	case p.sess == nil:
		if q.sessRec.State != receipt.SessionOpen || !q.sessOpen || q.lease.ClaimVersion == 0 || !q.lease.Claim.Of(w) {
			bad("begin", "published a session that is not open, held and listed by its creator (state %s, open entry %v)", q.sessRec.State, q.sessOpen)
		}
	case q.sess == nil:
		switch {
		case p.sessRec.State == receipt.SessionOpen:
			bad("cleanup", "deleted an open session")
		case p.sessRec.RetainUntil > now.UnixMilli():
			bad("cleanup", "deleted a session %v before its retention ended", time.UnixMilli(p.sessRec.RetainUntil).Sub(now))
		}
		if job, ok := a.jobs["cleaner"]; ok && job != w {
			bad("cleanup", "the cleaner's job lease is held by %s: a stale cleaner's delete landed", job)
		}
	case p.sessRec.State != receipt.SessionOpen:
		if !bytes.Equal(p.sess, q.sess) {
			bad("write", "rewrote a session that had ended %s", p.sessRec.State)
		}
		if q.lease.ClaimVersion != 0 {
			bad("write", "an ended session is held again (%s#%d)", q.lease.Claim.Node, q.lease.Claim.Incarnation)
		}
	case q.sessRec.State == receipt.SessionOpen:
		if !bytes.Equal(p.sess, q.sess) && !holder {
			bad("stage", "a stale owner's step landed: %s#%d holds the session", p.lease.Claim.Node, p.lease.Claim.Incarnation)
		}
		if !q.sessOpen {
			bad("write", "an open session lost its open entry")
		}
		if q.lease.ClaimVersion != p.lease.ClaimVersion {
			bad("write", "an open session's claim changed hands (%s#%d to %s#%d)", p.lease.Claim.Node, p.lease.Claim.Incarnation, q.lease.Claim.Node, q.lease.Claim.Incarnation)
		}
		if !holder && !bytes.Equal(p.expires, q.expires) && p.lease.ClaimVersion != 0 {
			bad("renewal", "a stale owner's renewal landed: %s#%d holds the session", p.lease.Claim.Node, p.lease.Claim.Incarnation)
		}
	default:
		a.judgeSessionEnd(bad, w, id, p, q, now)
	}
}

// judgeSessionEnd flags what a write that ended session id (committed or
// aborted it) must not have done.
func (a *auditor) judgeSessionEnd(bad sessionFault, w lease.Owner, id string, p, q receiptState, now time.Time) {
	holder := p.lease.ClaimVersion != 0 && p.lease.Claim.Of(w)
	r := q.sessRec
	kind := "end"
	if r.State == receipt.SessionCommitted {
		kind = "commit"
	}
	if q.lease.ClaimVersion != 0 || q.sessOpen || r.Staging != nil {
		bad(kind, "ended, but left its lease (%v), its open entry (%v) or its staging (%v)", q.lease.ClaimVersion != 0, q.sessOpen, r.Staging != nil)
	}
	switch {
	case r.State == receipt.SessionCommitted:
		if !holder {
			bad(kind, "committed by a non-holder: %s#%d holds the session", p.lease.Claim.Node, p.lease.Claim.Incarnation)
		}
		it, err := a.store.Get(context.Background(), store.NSReceipt.Key(r.TxnID))
		if err != nil {
			bad(kind, "committed, but its commit's receipt %s is not there", r.TxnID)
		} else if rec, err := receipt.DecodeRecord(it.Value); err != nil || rec.Session != id {
			bad(kind, "committed, but receipt %s is not its commit", r.TxnID)
		}
	case r.Reason == receipt.ReasonOwnerLost:
		// Presumed aborted: its lease was anyone's to take (or a
		// restarted process ends what its store says it holds).
		if !holder && p.lease.ClaimVersion != 0 && !lease.MayAdopt(p.lease, w, now) {
			bad(kind, "presumed aborted a live session: %s#%d holds it until %v", p.lease.Claim.Node, p.lease.Claim.Incarnation, p.lease.Expires.Sub(now))
		}
	case r.Reason == receipt.ReasonExpired:
		if !holder {
			bad(kind, "expired by a non-holder: %s#%d holds the session", p.lease.Claim.Node, p.lease.Claim.Incarnation)
		}
		if r.Ended < p.sessRec.Expires {
			bad(kind, "expired %v before its TTL ended", time.Duration(p.sessRec.Expires-r.Ended)*time.Millisecond)
		}
	default:
		if !holder {
			bad(kind, "aborted by a non-holder: %s#%d holds the session", p.lease.Claim.Node, p.lease.Claim.Incarnation)
		}
	}
}

// sessionFault records one violation of the session being judged.
type sessionFault func(kind, format string, args ...any)

func (a *auditor) report() (violations []string, fenced map[string]int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	fenced = map[string]int{}
	for k, v := range a.fenced {
		fenced[k] = v
	}
	return append([]string(nil), a.violations...), fenced
}
