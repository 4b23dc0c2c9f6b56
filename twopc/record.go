package twopc

import (
	"bytes"
	"context"
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/store"
)

// Keys: the coordinator record lives while any participant may hold intents
// (it is deleted once every participant is resolved); the decision lives
// until released.
//
//	txn/v1/rec/<txn_id>   record
//	txn/v1/dec/<txn_id>   decision
func recordKey(id string) []byte   { return store.NSTxn.Key("rec", id) }
func decisionKey(id string) []byte { return store.NSTxn.Key("dec", id) }

var (
	recordPrefix   = store.NSTxn.Prefix("rec")
	decisionPrefix = store.NSTxn.Prefix("dec")
)

const schemaV1 = 1

// record is the coordinator record. Fields are additive: new fields get new
// numbers and old records decode with them zero.
type record struct {
	Schema       int          `cbor:"1,keyasint"`
	Participants []partRecord `cbor:"2,keyasint"`
	Result       []byte       `cbor:"3,keyasint,omitempty"` // the commit result computed at prepare
	Created      int64        `cbor:"4,keyasint"`           // unix ms
	// Unprepared: written by a direct chain (direct.go), whose prepares
	// ride in the decision link, so none is durable without the
	// decision. Recovery may then only presume abort (docs/design.md §12).
	Unprepared bool `cbor:"5,keyasint,omitempty"`
}

type partRecord struct {
	ID       string `cbor:"1,keyasint"`
	Ref      []byte `cbor:"2,keyasint"`
	Resolved bool   `cbor:"3,keyasint,omitempty"`
}

// decision is the create-if-absent decision record.
type decision struct {
	Schema  int    `cbor:"1,keyasint"`
	Commit  bool   `cbor:"2,keyasint,omitempty"`
	Code    string `cbor:"3,keyasint,omitempty"`
	Message string `cbor:"4,keyasint,omitempty"`
	Result  []byte `cbor:"5,keyasint,omitempty"`
	Decided int64  `cbor:"6,keyasint"` // unix ms
}

func (d decision) outcome() Outcome {
	if d.Commit {
		return Committed{Result: d.Result}
	}
	return Aborted{Code: code.Code(d.Code), Message: d.Message}
}

func encodeDecision(o Outcome, at int64) ([]byte, error) {
	d := decision{Schema: schemaV1, Decided: at}
	switch o := o.(type) {
	case Committed:
		d.Commit, d.Result = true, o.Result
	case Aborted:
		d.Code, d.Message = string(o.Code), o.Message
	}
	return cbor.Marshal(d)
}

func decodeDecision(b []byte) (decision, error) {
	var d decision
	if err := cbor.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("%w: twopc: decision does not decode: %v", store.ErrCorruption, err)
	}
	return d, nil
}

func decodeRecord(b []byte) (record, error) {
	var r record
	if err := cbor.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%w: twopc: coordinator record does not decode: %v", store.ErrCorruption, err)
	}
	return r, nil
}

// A decided record never changes (docs/design.md §6): a decision is created once,
// create-if-absent, and deleted only by Release, once no coordinator record
// remains. Every batch this package writes is checked for it before the
// write (checkDecisionWrites: its own ops and the callers' `with` alike),
// and Resolve checks it again on read-back (checkDecisionStood).

// apply checks b's decision writes, then applies it.
func (c *Coordinator) apply(ctx context.Context, b *store.Batch) (store.Version, error) {
	checkDecisionWrites(b)
	return c.store.Apply(ctx, b)
}

// checkDecisionWrites panics if b would change a decided record: put a
// decision without requiring it absent, or delete one without requiring
// its coordinator record absent. Either is a bug — here or in a caller's
// `with` — that would let a decided transaction change its outcome, and
// nothing of b is written. It costs a prefix compare per op.
func checkDecisionWrites(b *store.Batch) {
	for _, op := range b.Ops {
		if !bytes.HasPrefix(op.Key, decisionPrefix) {
			continue
		}
		if !op.Delete {
			if !requiresAbsent(b, op.Key) {
				panic(fmt.Sprintf("twopc: invariant broken: a decided record never changes, but a write puts decision %q without requiring it absent", op.Key))
			}
			continue
		}
		if rec := recordKey(string(op.Key[len(decisionPrefix):])); !requiresAbsent(b, rec) {
			panic(fmt.Sprintf("twopc: invariant broken: a decided record never changes, but a write deletes decision %q without requiring its coordinator record %q absent", op.Key, rec))
		}
	}
}

// requiresAbsent reports whether b is conditioned on key being absent.
func requiresAbsent(b *store.Batch, key []byte) bool {
	for _, c := range b.Conds {
		if c.Kind == store.MustBeAbsent && bytes.Equal(c.Key, key) {
			return true
		}
	}
	return false
}
