package receipt

import (
	"context"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/table"
)

// View is an operator's view of a receipt.
type View struct {
	TxnID    string
	State    State
	Owner    *lease.Claim
	Created  time.Time
	Envelope *Envelope // terminal receipts only
	Debt     Debt
}

// Lookup returns the receipt of (principal, table, key): its state and, if
// terminal, its envelope. A missing receipt is engine.ErrNotFound.
func (s *Service) Lookup(ctx context.Context, principal, tbl, key string) (View, error) {
	if !ValidKey(key) {
		return View{}, code.Errorf(code.InvalidKey, "Idempotency-Key must be 1..%d visible ASCII characters", KeyBytesMax)
	}
	if !table.ValidTableName(tbl) {
		return View{}, table.InvalidTableName(tbl)
	}
	id := Bind(principal, tbl, key)
	rec, _, err := s.load(ctx, id)
	if err != nil {
		return View{}, err
	}
	v := View{TxnID: id, State: rec.State, Owner: rec.Owner, Created: time.UnixMilli(rec.Created), Debt: rec.Debt}
	if rec.State == Terminal {
		e := EnvelopeOf(rec, id)
		v.Envelope = &e
	} else if st, err := lease.Read(ctx, s.store, id); err == nil && st.ClaimVersion != 0 {
		v.Owner = &st.Claim
	}
	return v, nil
}
