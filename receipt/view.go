package receipt

import (
	"context"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
)

// View is an operator's view of a receipt, or of the tombstone left of it
// (State Expired).
type View struct {
	TxnID     string
	State     State
	Owner     *lease.Claim
	Created   time.Time // zero for a tombstone, which does not keep it
	Completed time.Time // terminal and expired only
	Envelope  *Envelope // terminal receipts only
	Outcome   string    // terminal and expired: the broad outcome
	Debt      Debt
	// Expiry is the promise of a terminal receipt, or what is left of it
	// for an expired one (ProtectUntil).
	Expiry Expiry
}

// Lookup returns the receipt of (principal, table, key): its state and, if
// terminal, its envelope; or, once the cleaner replaced it by a tombstone,
// that it expired. Neither is store.ErrNotFound.
func (s *Service) Lookup(ctx context.Context, principal, tbl, key string) (View, error) {
	if !ValidKey(key) {
		return View{}, code.Errorf(code.InvalidKey, "Idempotency-Key must be 1..%d visible ASCII characters", KeyBytesMax)
	}
	if !table.ValidTableName(tbl) {
		return View{}, table.InvalidTableName(tbl)
	}
	return s.lookupID(ctx, Bind(principal, tbl, key))
}

// LookupSessionCommit is Lookup of the receipt of session id's commit
// (its binding's table is "", which Lookup refuses): store.ErrNotFound
// while the session has no commit.
func (s *Service) LookupSessionCommit(ctx context.Context, principal, id string) (View, error) {
	rec, _, err := s.sess.loadSession(ctx, principal, id)
	if err != nil {
		return View{}, err
	}
	if rec.TxnID == "" {
		return View{}, store.ErrNotFound
	}
	return s.lookupID(ctx, rec.TxnID)
}

// lookupID is Lookup of the receipt bound as id.
func (s *Service) lookupID(ctx context.Context, id string) (View, error) {
	rec, _, tomb, err := s.core.loadOrTomb(ctx, id)
	if err != nil {
		return View{}, err
	}
	if tomb != nil {
		return View{TxnID: id, State: Expired, Completed: tomb.Completed, Outcome: tomb.Outcome,
			Expiry: Expiry{ProtectUntil: tomb.ProtectUntil}}, nil
	}
	v := View{TxnID: id, State: rec.State, Owner: rec.Owner, Created: time.UnixMilli(rec.Created), Debt: rec.Debt}
	if rec.State == Terminal {
		e := EnvelopeOf(rec, id)
		v.Envelope, v.Outcome, v.Expiry = &e, e.Outcome, s.core.expiryOf(rec)
		if rec.Completed != 0 {
			v.Completed = time.UnixMilli(rec.Completed)
		}
	} else if st, err := lease.Read(ctx, s.core.store, id); err == nil && st.ClaimVersion != 0 {
		v.Owner = &st.Claim
	}
	return v, nil
}
