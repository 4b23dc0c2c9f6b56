package receipt

import (
	"fmt"
	"strconv"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
)

// State is a receipt's lifecycle state.
type State uint8

const (
	// Pending: published, not started. Whoever owns it may execute it.
	Pending State = 1
	// Started: the one job allowed to execute marked it; 2PC may be in
	// flight. Only a typed coordinator outcome makes it terminal.
	Started State = 2
	// Terminal: immutable, holds the complete envelope.
	Terminal State = 3
	// Expired is never stored in a record: it is what a view or an answer
	// reports of a key whose receipt the cleaner replaced by its tombstone.
	Expired State = 4
)

func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Started:
		return "started"
	case Terminal:
		return "terminal"
	case Expired:
		return "expired"
	}
	return "unknown"
}

// Debt flags that pin a receipt against cleanup beyond its state.
type Debt uint8

const (
	// VisibilityDebt: decided and terminal, but some participant still holds
	// intents (resolution was deferred).
	VisibilityDebt Debt = 1 << iota
)

// Schema numbers of receipt records ever written. Decoding is additive:
// unknown fields are ignored and missing ones are zero.
const (
	// Schema1 receipts carry only the broad outcome (field 15); they replay
	// with the generic fallback envelope.
	Schema1 = 1
	// Schema2 receipts carry the complete envelope (field 14).
	Schema2 = 2
	// Schema3 receipts are schema 2 with their later times as offsets
	// from Created (recordtimes.go).
	Schema3 = 3
	// Schema4 receipts are schema 3 with a committed keyed batch's
	// envelope stored as its three counts (recordenvelope.go).
	Schema4 = 4
	// SchemaCurrent is what this version writes. Schemas 3 and 4 are read,
	// not yet written: a new record format ships in two releases, the
	// first reading it, the next writing it (docs/upgrading.md), so that
	// two builds serving one etcd prefix read each other's records.
	SchemaCurrent = Schema2
)

// Record is a receipt as stored at rcpt/v1/<txn_id>. The txn_id is the key,
// not a field.
type Record struct {
	Schema      int             `cbor:"1,keyasint"`
	Principal   string          `cbor:"2,keyasint"`
	Table       string          `cbor:"3,keyasint"`
	Key         string          `cbor:"4,keyasint"`
	Fingerprint []byte          `cbor:"5,keyasint"`
	Request     []byte          `cbor:"6,keyasint,omitempty"` // dropped once terminal
	State       State           `cbor:"7,keyasint"`
	Owner       *lease.Claim    `cbor:"8,keyasint,omitempty"` // who last wrote it while mutable
	Created     int64           `cbor:"9,keyasint"`           // unix ms
	Started     int64           `cbor:"10,keyasint,omitempty"`
	Completed   int64           `cbor:"11,keyasint,omitempty"`
	RetainUntil int64           `cbor:"12,keyasint,omitempty"` // unix ms; its exp/v1 entry
	Debt        Debt            `cbor:"13,keyasint,omitempty"`
	Envelope    *StoredEnvelope `cbor:"14,keyasint,omitempty"`
	Outcome     string          `cbor:"15,keyasint,omitempty"` // schema 1 only
	// Session is the interactive session this receipt commits (its
	// Request is then the session's table.Staging, CBOR), or "" for a
	// keyed batch.
	Session string `cbor:"16,keyasint,omitempty"`
	// ProtectUntil (unix ms, terminal receipts) is when the key may
	// execute again: until then, after RetainUntil, its tombstone refuses
	// it. Zero in records written before tombstones (tombstone.go).
	ProtectUntil int64 `cbor:"17,keyasint,omitempty"`
	// Entries are how many entries each list of the request had and the
	// digests of its first entries (table.EntryDigests, one slice): what
	// a mismatch needs to say which entries differ (entrydiff.go) once the
	// request itself is dropped. Keyed batches only.
	Entries []byte `cbor:"18,keyasint,omitempty"`
	// ResolvedBy is the operator (principal) whose Resolve published the
	// terminal envelope (resolve.go); the envelope's message says whether
	// the operator's presumed abort decided it or a decision existed.
	ResolvedBy string `cbor:"20,keyasint,omitempty"`
	// BodyDigest is BodyDigest of the raw bytes the request came in, if
	// it came in bytes (verbatim.go): a retry of the same bytes replays
	// without being parsed. Kept once terminal, as Fingerprint is.
	BodyDigest []byte `cbor:"21,keyasint,omitempty"`

	// request is the canonical request of a keyed receipt being created,
	// for EncodeRecord to lay out as Request if the record is published
	// pending (lazyRequest); never encoded, decoded or compared.
	request lazyRequest
}

// StoredEnvelope is the complete terminal answer (the transaction ID is the
// record's key).
type StoredEnvelope struct {
	Status    int    `cbor:"1,keyasint"`
	Outcome   string `cbor:"2,keyasint"`
	Code      string `cbor:"3,keyasint,omitempty"`
	Message   string `cbor:"4,keyasint,omitempty"`
	Retryable bool   `cbor:"5,keyasint,omitempty"`
	RetryWith string `cbor:"6,keyasint,omitempty"`
	Result    []byte `cbor:"7,keyasint,omitempty"`
	// Retry is Envelope.Retry (new_session), stored with the answer it
	// belongs to: a record written before it existed replays without it,
	// as it first answered.
	Retry string `cbor:"8,keyasint,omitempty"`
}

var encMode = func() cbor.EncMode {
	m, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	return m
}()

// EncodeRecord encodes r deterministically. A record that breaks its
// invariants (check, invariants.go) is refused as store.ErrInvariant; the
// check reads r's times and envelope as they are, before any goes out as
// an offset or as counts (recordtimes.go, recordenvelope.go).
func EncodeRecord(r *Record) ([]byte, error) {
	if lr := r.request; lr.batch != nil {
		// Laid out when the record first goes out (pending, the one state
		// that stores it) and not kept after: a copy made for a later
		// state, which drops the request, does not hold the batch.
		if r.State == Pending && len(r.Request) == 0 {
			r.Request = requestBytes(lr.table, lr.batch)
		}
		r.request = lazyRequest{}
	}
	if err := r.check(); err != nil {
		return nil, store.InvalidRecord("receipt: record", err)
	}
	return encMode.Marshal(onWire(r))
}

// DecodeRecord decodes any schema ever written. Bytes that do not decode,
// or decode to a record that breaks its invariants, are corruption; the
// store's readers name the key (recordAt).
func DecodeRecord(b []byte) (*Record, error) {
	r, err := decodeRecord(b)
	if err != nil {
		return nil, fmt.Errorf("%w: receipt: record does not decode: %v", store.ErrCorruption, err)
	}
	return r, nil
}

// recordAt decodes the receipt stored at key: a failure is that key's
// damage (store.RecordError).
func recordAt(key, b []byte) (*Record, error) {
	r, err := decodeRecord(b)
	if err != nil {
		return nil, store.RecordError(key, "receipt: record", err)
	}
	return r, nil
}

func decodeRecord(b []byte) (*Record, error) {
	r, err := unmarshalRecord(b)
	if err != nil {
		return nil, err
	}
	timesFromWire(r) // the check reads times, not offsets
	if err := r.check(); err != nil {
		return nil, err
	}
	return r, nil
}

// Keys.
func receiptKey(id string) []byte        { return store.NSReceipt.Key(id) }
func recoveryKey(node, id string) []byte { return store.NSRecovery.Key(node, id) }
func expiryKey(deadlineMs int64, id string) []byte {
	// exp/v1/<deadline, 20 digits zero-padded>/<id>, in one allocation.
	if deadlineMs < 0 { // never a deadline; formatted as it always was
		return store.NSExpiry.Key(fmt.Sprintf("%020d", deadlineMs), id)
	}
	k := make([]byte, 0, len(store.NSExpiry)+expiryDigits+1+len(id))
	k = append(k, store.NSExpiry...)
	var digits [expiryDigits]byte
	d := strconv.AppendInt(digits[:0], deadlineMs, 10)
	for range expiryDigits - len(d) {
		k = append(k, '0')
	}
	return append(append(append(k, d...), '/'), id...)
}

// expiryDigits is the width of a retention entry's deadline.
const expiryDigits = 20

// parseExpiryKey splits exp/v1/<deadline>/<id>.
func parseExpiryKey(k []byte) (int64, string, bool) {
	rest := string(store.NSExpiry.Suffix(k))
	if len(rest) < 22 || rest[20] != '/' {
		return 0, "", false
	}
	ms, err := strconv.ParseInt(rest[:20], 10, 64)
	if err != nil {
		return 0, "", false
	}
	return ms, rest[21:], true
}
