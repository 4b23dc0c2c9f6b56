package twopc

import (
	"bytes"
	"context"
	"errors"
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

// txnKeys returns recordKey(id) and decisionKey(id) in one allocation, for
// a write that conditions on both (CommitOnce's, once a keyed request).
func txnKeys(id string) (rec, dec []byte) {
	n := len(recordPrefix) + len(id)
	buf := make([]byte, 0, 2*n)
	rec = append(append(buf, recordPrefix...), id...)
	dec = append(append(buf[n:n], decisionPrefix...), id...)
	return rec[:n:n], dec
}

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
	if err := d.check(); err != nil {
		return nil, store.InvalidRecord("twopc: decision", err)
	}
	return cbor.Marshal(d)
}

// encodeRecord encodes coordinator record r; one that breaks its
// invariants is refused as store.ErrInvariant.
func encodeRecord(r record) ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, store.InvalidRecord("twopc: coordinator record", err)
	}
	return cbor.Marshal(r)
}

// decodeDecision decodes the decision stored at key: bytes that do not
// decode, or break its invariants, are that key's damage.
func decodeDecision(key, b []byte) (decision, error) {
	var d decision
	err := cbor.Unmarshal(b, &d)
	if err == nil {
		err = d.check()
	}
	if err != nil {
		return decision{}, store.RecordError(key, "twopc: decision", err)
	}
	return d, nil
}

// decodeRecord decodes the coordinator record stored at key, as
// decodeDecision does.
func decodeRecord(key, b []byte) (record, error) {
	var r record
	err := cbor.Unmarshal(b, &r)
	if err == nil {
		err = r.check()
	}
	if err != nil {
		return record{}, store.RecordError(key, "twopc: coordinator record", err)
	}
	return r, nil
}

// participantAt rebuilds participant pr of the coordinator record at key;
// a ref that does not rebuild is named by that key.
func (c *Coordinator) participantAt(key []byte, pr partRecord) (Participant, error) {
	p, err := c.resolve(pr.Ref)
	if err != nil {
		return nil, fmt.Errorf("twopc: participant %q of the coordinator record at %q: %w", pr.ID, key, err)
	}
	return p, nil
}

// The paired assertions (TigerBeetle's): the same check before a record is
// encoded (a bug: nothing is written) and after it is decoded (damage).

// check returns the first invariant d breaks: an abort says why (its
// code: what the receipt's envelope answers), a commit has no such code.
func (d decision) check() error {
	switch {
	case d.Schema < schemaV1:
		return errors.New("no schema")
	case d.Commit && d.Code != "":
		return fmt.Errorf("a commit with abort code %q", d.Code)
	case !d.Commit && d.Code == "":
		return errors.New("an abort without a code")
	}
	return nil
}

// check returns the first invariant r breaks: every participant is named,
// and an unprepared record (a direct chain's, direct.go) names none.
func (r record) check() error {
	if r.Schema < schemaV1 {
		return errors.New("no schema")
	}
	if r.Unprepared && len(r.Participants) > 0 {
		return fmt.Errorf("unprepared with %d participants", len(r.Participants))
	}
	for i, p := range r.Participants {
		if p.ID == "" {
			return fmt.Errorf("participant %d without an ID", i)
		}
	}
	return nil
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
