package lease

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/idemdb/idem/store"
)

// Held is this process's hold on one receipt: its claim, the claim key's
// version (the fencing token) and the expiry last confirmed in the store.
// It is shared by the foreground execution, recovery and the renewal
// supervisor; its mutex serialises their updates, never their I/O.
type Held struct {
	ID string
	// Kind is what the lease holds (a receipt unless set): the active set
	// renews each kind fairly against the others.
	Kind Kind
	// Since is when what the lease holds came into being (a receipt's or a
	// session's creation), set before the hold joins the active set and
	// never changed: the active set's oldest tells an operator how long
	// work has stayed mutable (ActiveSet.OldestOf). Zero: unknown.
	Since time.Time

	mu      sync.Mutex
	claim   Claim
	version store.Version
	until   time.Time
	status  Status
}

// Snapshot returns the claim, fencing version, confirmed expiry and status.
func (h *Held) Snapshot() (Claim, store.Version, time.Time, Status) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.claim, h.version, h.until, h.status
}

// Status returns the current status.
func (h *Held) Status() Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.status
}

// Until is the confirmed expiry.
func (h *Held) Until() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.until
}

// Fence adds to b the condition that this claim is still current. It fails
// with ErrFenced for a lost lease and asks for Resync when unconfirmed.
func (h *Held) Fence(b *store.Batch) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.status == Lost:
		return ErrFenced
	case h.version == 0:
		return errUnconfirmed
	}
	b.AtVersion(ClaimKey(h.ID), h.version)
	return nil
}

// Confirmed records a durable write of the claim (creation, adoption) at
// version v with expiry until.
func (h *Held) Confirmed(v store.Version, until time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.version, h.until, h.status = v, until, h.status.after(published)
}

// Unconfirm marks the claim's publication as ambiguous.
func (h *Held) Unconfirm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.status = h.status.after(publishAmbiguous); h.status == Unconfirmed {
		h.version = 0
	}
}

// MarkLost records that the lease is gone (fenced, or the receipt finished
// elsewhere).
func (h *Held) MarkLost() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.status = h.status.after(fenced)
}

func (h *Held) renewed(until time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.status = h.status.after(renewed); h.status == Live {
		h.until = until
	}
}

func (h *Held) uncertain() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.status = h.status.after(expiryRanOut)
}

// Resync reads the claim back after an ambiguous publication: if the store
// holds exactly this claim, its version becomes the fencing token; if it
// holds another or none, the lease is lost. A claim still being published
// is left alone (errPublishing): its writer settles it.
func (h *Held) Resync(ctx context.Context, st store.Store) error {
	if h.Status() == Publishing {
		return errPublishing
	}
	it, err := st.Get(ctx, ClaimKey(h.ID))
	if errors.Is(err, store.ErrNotFound) {
		h.MarkLost()
		return ErrFenced
	}
	if err != nil {
		return err
	}
	c, err := decodeClaim(it.Key, it.Value)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if c != h.claim {
		h.status = h.status.after(fenced)
		return ErrFenced
	}
	h.version = it.Version
	h.status = h.status.after(readBack)
	return nil
}

// Renewed records that a write extended the lease to until (the claim, and
// so the fencing version, is unchanged).
func (h *Held) Renewed(until time.Time) { h.renewed(until) }

// Claim returns the claim held.
func (h *Held) Claim() Claim {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.claim
}

// Resume returns a Held for a claim this owner already has in the store
// (found after its flight ended, e.g. after an ambiguous answer).
func Resume(id string, st State) *Held {
	return &Held{ID: id, Kind: KindOf(id), claim: st.Claim, version: st.ClaimVersion, until: st.Expires, status: Live}
}

// PutExpiry adds to b an extension of id's lease to until.
func PutExpiry(b *store.Batch, id string, until time.Time) {
	b.Put(ExpiryKey(id), encodeExpiry(until))
}
