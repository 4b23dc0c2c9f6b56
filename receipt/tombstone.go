package receipt

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/idemdb/idem/store"
)

// A tombstone is what the cleaner leaves of a terminal receipt whose
// retention ended: enough to refuse the key — it never executes again —
// and to say what became of it, in a few dozen bytes instead of the
// envelope. It lives until the receipt's ProtectUntil (Options.
// TombstoneRetention after completion), and is itself cleaned in bounded,
// fenced batches (tombclean.go).
//
// The key is the namespace and the transaction ID's 16 bytes, not its 32
// hex characters: tombstones outnumber receipts by the ratio of the two
// retentions (30 to 1 by default), so each byte counts thirty times.
//
// Value (tombFormat1), fixed-size fields first:
//
//	format (1) | outcome (1) | fingerprint[:8] | uvarint completed ms |
//	uvarint ProtectUntil − completed, ms
type Tombstone struct {
	TxnID        string
	Outcome      string // the receipt's broad outcome
	Fingerprint  [tombFingerprintBytes]byte
	Completed    time.Time
	ProtectUntil time.Time
}

const (
	tombFormat1 = 1
	// tombFingerprintBytes of the request fingerprint are kept: enough to
	// tell a client whether it resent the same request (2^-64 to err),
	// and the refusal never depends on it.
	tombFingerprintBytes = 8
	// tombValueBytesMax bounds an encoded value (two uvarints of 64 bits).
	tombValueBytesMax = 2 + tombFingerprintBytes + 2*binary.MaxVarintLen64
	txnIDBytes        = 16
)

// The broad outcomes a tombstone keeps, one byte each.
var tombOutcomes = [...]string{1: OutcomeCommitted, 2: OutcomeAborted, 3: OutcomeNotApplied}

// tombKey is tomb/v1/<the 16 bytes of txn_id>; nil for an ID that is not
// 32 hex digits (no receipt has one).
func tombKey(id string) []byte {
	if len(id) != 2*txnIDBytes {
		return nil
	}
	k := make([]byte, len(store.NSTomb)+txnIDBytes)
	copy(k, store.NSTomb)
	if _, err := hex.Decode(k[len(store.NSTomb):], []byte(id)); err != nil {
		return nil
	}
	return k
}

// encodeTomb encodes t's value; a tombstone that breaks its invariants
// (check) is refused as store.ErrInvariant.
func encodeTomb(t *Tombstone) ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, store.InvalidRecord("receipt: tombstone", err)
	}
	return appendTomb(make([]byte, 0, tombValueBytesMax), t), nil
}

// appendTomb appends t's value to b, unchecked.
func appendTomb(b []byte, t *Tombstone) []byte {
	b = append(b, tombFormat1, tombOutcome(t.Outcome))
	b = append(b, t.Fingerprint[:]...)
	done := t.Completed.UnixMilli()
	b = binary.AppendUvarint(b, uint64(max(done, 0)))
	return binary.AppendUvarint(b, uint64(max(t.ProtectUntil.UnixMilli()-done, 0)))
}

// tombOutcome is outcome's byte, 0 for none a tombstone keeps.
func tombOutcome(outcome string) byte {
	for i, o := range tombOutcomes {
		if o != "" && o == outcome {
			return byte(i)
		}
	}
	return 0
}

// decodeTomb decodes the tombstone of id from its value. A value that does
// not decode is that key's damage (ErrTombstoneCorrupt, store.ValueError).
func decodeTomb(id string, v []byte) (*Tombstone, error) {
	t, why := parseTomb(id, v)
	if why != "" {
		k := tombKey(id)
		return nil, &store.ValueError{Key: k, Err: fmt.Errorf("%w at %q (txn_id %s): %s", ErrTombstoneCorrupt, k, id, why)}
	}
	return t, nil
}

// parseTomb reads v, or says why it cannot.
func parseTomb(id string, v []byte) (*Tombstone, string) {
	if len(v) < 2+tombFingerprintBytes || v[0] != tombFormat1 || int(v[1]) >= len(tombOutcomes) || tombOutcomes[v[1]] == "" {
		return nil, "no format, outcome and fingerprint"
	}
	t := &Tombstone{TxnID: id, Outcome: tombOutcomes[v[1]]}
	copy(t.Fingerprint[:], v[2:])
	rest := v[2+tombFingerprintBytes:]
	done, n := binary.Uvarint(rest)
	if n <= 0 {
		return nil, "no completion time"
	}
	span, m := binary.Uvarint(rest[n:])
	if m <= 0 || n+m != len(rest) {
		return nil, "no protection span, or bytes after it"
	}
	t.Completed = time.UnixMilli(int64(done))
	t.ProtectUntil = t.Completed.Add(time.Duration(span) * time.Millisecond)
	return t, ""
}

// tombstoneOf is what the cleaner leaves of terminal rec (the fields a
// legacy record lacks are zero). ok is false when it leaves nothing: the
// receipt is protected no longer than it replays.
func (rt *retention) tombstoneOf(id string, rec *Record) (*Tombstone, bool) {
	until := rt.core.protectUntil(rec)
	if until <= rec.RetainUntil {
		return nil, false
	}
	t := &Tombstone{TxnID: id, Outcome: EnvelopeOf(rec, id).Outcome,
		Completed: time.UnixMilli(rec.Completed), ProtectUntil: time.UnixMilli(until)}
	copy(t.Fingerprint[:], rec.Fingerprint)
	return t, true
}

// protectUntil is when rec's key may execute again (unix ms): what the
// record promised, or — for a record written before receipts carried the
// promise — its completion plus today's tombstone retention.
func (c *core) protectUntil(rec *Record) int64 {
	if rec.ProtectUntil != 0 {
		return rec.ProtectUntil
	}
	if c.opts.TombstoneRetention <= 0 || rec.Completed == 0 {
		return rec.RetainUntil
	}
	return max(rec.RetainUntil, time.UnixMilli(rec.Completed).Add(c.opts.TombstoneRetention).UnixMilli())
}

// promise is the ProtectUntil a receipt completing at now writes.
func (c *core) promise(now time.Time, retainUntil int64) int64 {
	if c.opts.TombstoneRetention <= 0 {
		return retainUntil
	}
	return max(retainUntil, now.Add(c.opts.TombstoneRetention).UnixMilli())
}

// loadTomb reads the tombstone of id; store.ErrNotFound when there is none.
func (c *core) loadTomb(ctx context.Context, id string) (*Tombstone, error) {
	return c.loadTombAt(ctx, id, tombKey(id))
}

// loadTombAt is loadTomb at k, id's tombstone key.
func (c *core) loadTombAt(ctx context.Context, id string, k []byte) (*Tombstone, error) {
	if k == nil {
		return nil, store.ErrNotFound
	}
	it, err := c.store.Get(ctx, k)
	if err != nil {
		return nil, err
	}
	return decodeTomb(id, it.Value)
}

// TombstoneKey is the key of txn_id id's tombstone (nil for an ID that is
// not 32 hex digits), for tools and checkers that read the store.
func TombstoneKey(id string) []byte { return tombKey(id) }

// DecodeTombstone decodes the tombstone of id from its stored value.
func DecodeTombstone(id string, v []byte) (*Tombstone, error) { return decodeTomb(id, v) }
