package lease

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/store"
)

// A receipt's lease is two keys:
//
//	lease/v1/claim/<id>  Claim {node, incarnation, epoch} — the fencing token
//	lease/v1/ttl/<id>    expiry (unix ns, 8 bytes big endian)
//
// The claim changes only when ownership does (creation, adoption), so every
// owner write is fenced by AtVersion(claim) while renewals, which rewrite
// only the expiry, never invalidate an owner's token. An adopter conditions
// on both keys' versions: a renewal that lands first proves the old owner
// alive and makes the adoption fail.
func ClaimKey(id string) []byte  { return store.NSLease.Key("claim", id) }
func ExpiryKey(id string) []byte { return store.NSLease.Key("ttl", id) }

// Claim is who holds a receipt.
type Claim struct {
	Node        string `cbor:"1,keyasint"`
	Incarnation uint64 `cbor:"2,keyasint"`
	Epoch       uint64 `cbor:"3,keyasint"`
}

// Of reports whether the claim was made by owner o (any epoch).
func (c Claim) Of(o Owner) bool { return c.Node == o.Node && c.Incarnation == o.Incarnation }

// check returns the invariant c breaks, nil if it is well formed: a claim
// names its node and has epoch 1 or later (ClaimNew's, one more at each
// adoption). It is asserted before a claim is encoded and after one is
// decoded (decodeClaim).
func (c Claim) check() error {
	switch {
	case c.Node == "" || len(c.Node) > NodeIDBytesMax:
		return fmt.Errorf("node ID of %d bytes (1..%d)", len(c.Node), NodeIDBytesMax)
	case c.Epoch == 0:
		return errors.New("epoch 0")
	}
	return nil
}

// encodeClaim encodes c. A claim that breaks its invariants panics, as
// twopc's checkDecisionWrites does, before the batch it joins is applied:
// its node comes from a registered Owner and its epoch from a claim read
// back checked, so only a bug here reaches it, and ClaimNew and ClaimAdopt
// have no error to return it by.
func encodeClaim(c Claim) []byte {
	if err := c.check(); err != nil {
		panic(fmt.Sprintf("lease: invariant broken: %v", store.InvalidRecord("lease: claim", err)))
	}
	b, _ := cbor.Marshal(c)
	return b
}

// decodeClaim decodes the claim stored at key: bytes that do not decode,
// or decode to a claim that breaks its invariants, are that key's damage.
func decodeClaim(key, b []byte) (Claim, error) {
	var c Claim
	err := cbor.Unmarshal(b, &c)
	if err == nil {
		err = c.check()
	}
	if err != nil {
		return Claim{}, store.RecordError(key, "lease: claim", err)
	}
	return c, nil
}

func encodeExpiry(t time.Time) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(t.UnixNano()))
}

// State is what the store says about a receipt's lease.
type State struct {
	Claim         Claim
	ClaimVersion  store.Version // 0: no claim
	Expires       time.Time
	ExpiryVersion store.Version
}

// Read loads a receipt's lease.
func Read(ctx context.Context, sto store.Store, id string) (State, error) {
	var st State
	it, err := sto.Get(ctx, ClaimKey(id))
	switch {
	case err == nil:
		if st.Claim, err = decodeClaim(it.Key, it.Value); err != nil {
			return State{}, err
		}
		st.ClaimVersion = it.Version
	case !errors.Is(err, store.ErrNotFound):
		return State{}, err
	}
	it, err = sto.Get(ctx, ExpiryKey(id))
	switch {
	case err == nil:
		if len(it.Value) != 8 {
			return State{}, store.RecordError(it.Key, "lease: expiry", fmt.Errorf("%d bytes, not 8", len(it.Value)))
		}
		st.Expires = time.Unix(0, int64(binary.BigEndian.Uint64(it.Value)))
		st.ExpiryVersion = it.Version
	case !errors.Is(err, store.ErrNotFound):
		return State{}, err
	}
	return st, nil
}

// MayAdopt reports whether owner me may take a receipt whose lease is st:
// a claim of an older incarnation of the same node at once, anyone else's
// once it expired by me's clock. A missing claim is not adoptable: the
// receipt is immutable or gone.
func MayAdopt(st State, me Owner, now time.Time) bool {
	switch {
	case st.ClaimVersion == 0:
		return false
	case st.Claim.Node == me.Node && st.Claim.Incarnation < me.Incarnation:
		return true
	case st.Claim.Of(me):
		return false
	}
	return !now.Before(st.Expires)
}

// ClaimNew adds to b the lease of a receipt being created by o: the claim
// must not exist. It returns the Held to track; it is Publishing until the
// caller reports the write's version with Confirmed (or its ambiguity with
// Unconfirm).
func ClaimNew(b *store.Batch, id string, o Owner, until time.Time) *Held {
	c := Claim{Node: o.Node, Incarnation: o.Incarnation, Epoch: 1}
	ck := ClaimKey(id) // a batch never changes a key it is given: one for both
	b.Absent(ck).Put(ck, encodeClaim(c)).Put(ExpiryKey(id), encodeExpiry(until))
	return &Held{ID: id, Kind: KindOf(id), claim: c, until: until, status: Publishing}
}

// ClaimAdopt adds to b the CAS that moves a receipt from the lease in st to
// o, one epoch later. Like ClaimNew, the Held is Publishing until settled.
func ClaimAdopt(b *store.Batch, id string, st State, o Owner, until time.Time) *Held {
	c := Claim{Node: o.Node, Incarnation: o.Incarnation, Epoch: st.Claim.Epoch + 1}
	if fault.Planted(fault.BugAdoptKeepsEpoch) { // planted only under -tags idem_selftest
		c.Epoch = st.Claim.Epoch // planted bug: the adoption keeps the epoch
	}
	ck, ek := ClaimKey(id), ExpiryKey(id)
	b.AtVersion(ck, st.ClaimVersion).AtVersion(ek, st.ExpiryVersion).Put(ck, encodeClaim(c)).Put(ek, encodeExpiry(until))
	return &Held{ID: id, Kind: KindOf(id), claim: c, until: until, status: Publishing}
}

// Drop adds to b the removal of a receipt's lease (the receipt became
// immutable).
func Drop(b *store.Batch, id string) {
	b.Delete(ClaimKey(id)).Delete(ExpiryKey(id))
}
