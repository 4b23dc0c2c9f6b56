package receipt

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
)

// Interactive sessions (docs/design.md §14) are the receipt lifecycle's second
// kind. A session is begun, stages batches and reads its own writes while
// it is open, and ends by an abort or by its commit — which is a receipt:
// the session's staging goes through the same create, start and decide
// steps as a keyed batch (session_commit.go), so a commit executes exactly
// once and replays exactly. Open sessions are owned and fenced under the
// same lease records as receipts, renewed by the same supervisor in fair
// shares with them, and use the same executor; before its commit is
// requested, a session whose owner is gone, or that outlived its TTL, is
// presumed aborted (session_end.go).
//
//	sess/v1/rec/<id>   the session record (SessionRecord)
//	sess/v1/open/<id>  present while the session is open: what maintenance
//	                   walks to end the sessions of dead owners and expired ones
//	sess/v1/step/<id>/<n>  the documents step n changed (session_steps.go)
//
// An ended session's record is kept for the retention period under an
// exp/v1 entry, as a terminal receipt is, and cleaned by the same cleaner.

// SessionState is a session's lifecycle state.
type SessionState uint8

const (
	// SessionOpen: staging; mutable, held under a lease.
	SessionOpen SessionState = 1
	// SessionCommitted: its commit was requested; the commit is the
	// receipt TxnID, which finishes it whatever becomes of this process.
	SessionCommitted SessionState = 2
	// SessionAborted: ended without a commit; nothing it staged applies.
	SessionAborted SessionState = 3
)

func (s SessionState) String() string {
	switch s {
	case SessionOpen:
		return "open"
	case SessionCommitted:
		return "committed"
	case SessionAborted:
		return "aborted"
	}
	return "unknown"
}

// Why a session was aborted (SessionRecord.Reason).
const (
	ReasonAborted   = "aborted"    // the client aborted it
	ReasonExpired   = "expired"    // it outlived its TTL
	ReasonOwnerLost = "owner_lost" // its owner's lease expired, or the owner restarted
)

// Session bounds and defaults.
const (
	// sessionTTLDefault is the lifetime of a session begun without one.
	sessionTTLDefault = 30 * time.Second
	// SessionTTLMaxDefault is Options.SessionTTLMax's default: a session
	// holds optimistic reads, and the longer it lives the likelier its
	// commit conflicts (FoundationDB caps a transaction at 5 s; Kafka's
	// transaction timeout defaults to one minute).
	SessionTTLMaxDefault = 5 * time.Minute
	// SessionsOpenMaxDefault is Options.SessionsOpenMax's default.
	SessionsOpenMaxDefault = 4096
	// SessionStepsMax bounds the steps that change a session (stages and
	// first reads): each is one entry its next steps read back.
	SessionStepsMax = 256
	// sessionSchemaCurrent is the schema of session records written now.
	sessionSchemaCurrent = 1
)

// SessionRecord is a session as stored at sess/v1/rec/<id>.
type SessionRecord struct {
	Schema    int          `cbor:"1,keyasint"`
	Principal string       `cbor:"2,keyasint"`
	State     SessionState `cbor:"3,keyasint"`
	Owner     *lease.Claim `cbor:"4,keyasint,omitempty"` // who holds it while open
	Created   int64        `cbor:"5,keyasint"`           // unix ms
	Expires   int64        `cbor:"6,keyasint"`           // unix ms: an open session is aborted after it
	// Staging is its staging's header (tables, result, bytes) while it is
	// open; the documents it read and wrote live in its steps
	// (session_steps.go). Dropped once it ends (a commit carries the whole
	// staging in its receipt).
	Staging *table.Staging `cbor:"7,keyasint,omitempty"`
	Stages  int            `cbor:"8,keyasint,omitempty"` // batches staged
	Key     string         `cbor:"9,keyasint,omitempty"` // committed: the Idempotency-Key of the commit
	TxnID   string         `cbor:"10,keyasint,omitempty"`
	Reason  string         `cbor:"11,keyasint,omitempty"` // aborted: why
	Ended   int64          `cbor:"12,keyasint,omitempty"`
	// RetainUntil: an ended session's record is kept until then (its
	// exp/v1 entry), so that later calls learn how it ended.
	RetainUntil int64        `cbor:"13,keyasint,omitempty"`
	Result      table.Result `cbor:"14,keyasint,omitempty"` // what its staged batches did
	// Steps counts the steps that changed its staging (stages and first
	// reads), each one a sess/v1/step entry; Docs and Writes count the
	// documents it read or wrote and wrote.
	Steps  int `cbor:"15,keyasint,omitempty"`
	Docs   int `cbor:"16,keyasint,omitempty"`
	Writes int `cbor:"17,keyasint,omitempty"`
}

// encodeSession encodes r deterministically. A record that breaks its
// invariants (check, invariants.go) is refused as store.ErrInvariant.
func encodeSession(r *SessionRecord) ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, store.InvalidRecord("receipt: session record", err)
	}
	return encMode.Marshal(r)
}

// DecodeSession decodes a session record. Bytes that do not decode, or
// decode to a record that breaks its invariants, are corruption; the
// store's readers name the key (sessionAt).
func DecodeSession(b []byte) (*SessionRecord, error) {
	r, err := decodeSession(b)
	if err != nil {
		return nil, fmt.Errorf("%w: receipt: session record does not decode: %v", store.ErrCorruption, err)
	}
	return r, nil
}

// sessionAt decodes the session record stored at key: a failure is that
// key's damage (store.RecordError).
func sessionAt(key, b []byte) (*SessionRecord, error) {
	r, err := decodeSession(b)
	if err != nil {
		return nil, store.RecordError(key, "receipt: session record", err)
	}
	return r, nil
}

func decodeSession(b []byte) (*SessionRecord, error) {
	var r SessionRecord
	if err := cbor.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if err := r.check(); err != nil {
		return nil, err
	}
	if r.State == SessionOpen && r.Staging == nil {
		r.Staging = &table.Staging{}
	}
	return &r, nil
}

func sessionKey(id string) []byte     { return store.NSSession.Key("rec", id) }
func sessionOpenKey(id string) []byte { return store.NSSession.Key("open", id) }
func sessionStepKey(id string, n int) []byte {
	return store.NSSession.Key("step", id, fmt.Sprintf("%08d", n))
}
func sessionStepPrefix(id string) []byte { return store.NSSession.Prefix("step", id) }

// sessionIDBytes is the entropy of a session ID: IDs are bearer names
// within a principal, so they must not be guessable.
const sessionIDBytes = 16

// newSessionID returns a fresh session ID: lease.SessionIDPrefix and 32
// hex digits (never a receipt's ID, which is hex only). With shard > 0 its
// first byte is shard-1, the store shard it lives on (Options.SessionShard);
// the other 15 bytes are still beyond guessing.
func newSessionID(shard int) (string, error) {
	var b [sessionIDBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	if shard > 0 {
		b[0] = byte(shard - 1)
	}
	return lease.SessionIDPrefix + hex.EncodeToString(b[:]), nil
}

// ValidSessionID reports whether id has the form of a session ID.
func ValidSessionID(id string) bool {
	p := lease.SessionIDPrefix
	if len(id) != len(p)+2*sessionIDBytes || id[:len(p)] != p {
		return false
	}
	for i := len(p); i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Session is what a caller learns about a session.
type Session struct {
	ID      string
	State   SessionState
	Reason  string // aborted: why
	Created time.Time
	Expires time.Time
	Stages  int
	Docs    int // documents read or written
	Writes  int // documents written
	Result  table.Result
	Key     string // committed: the Idempotency-Key of its commit
	TxnID   string // committed: its commit's transaction
	// Outcome and Code are those of its commit's receipt (SessionInfo):
	// State SessionCommitted says the commit was asked for, Outcome
	// whether it committed — committed, aborted, not_applied, or pending
	// while it is not terminal; "" once the receipt is gone.
	Outcome  string
	Code     code.Code
	Retained time.Time
}

func sessionOf(id string, r *SessionRecord) Session {
	s := Session{ID: id, State: r.State, Reason: r.Reason, Created: time.UnixMilli(r.Created),
		Expires: time.UnixMilli(r.Expires), Stages: r.Stages, Result: r.Result, Key: r.Key, TxnID: r.TxnID}
	if r.State == SessionOpen {
		s.Docs, s.Writes = r.Docs, r.Writes
	}
	if r.RetainUntil != 0 {
		s.Retained = time.UnixMilli(r.RetainUntil)
	}
	return s
}

// Typed session refusals. Each message is written once, here.
func errSessionNotFound(id string) *code.Error {
	return code.Errorf(code.SessionNotFound, "session %q does not exist (or has been cleaned up)", id)
}

// endedWhy says, for each Reason, why a session is aborted.
var endedWhy = map[string]string{
	ReasonAborted:   "its client aborted it",
	ReasonExpired:   "it outlived its TTL",
	ReasonOwnerLost: "the node that held it stopped before its commit was requested",
}

func errSessionEnded(id string, r *SessionRecord) *code.Error {
	if r.State == SessionCommitted {
		return code.Errorf(code.SessionCommitted, "session %q is committed (transaction %s); begin a new session", id, r.TxnID)
	}
	why := endedWhy[r.Reason]
	if why == "" {
		why = "it ended"
	}
	return code.Errorf(code.SessionAborted, "session %q is aborted: %s; nothing it staged was applied", id, why)
}
