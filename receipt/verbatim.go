package receipt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
)

// A retry usually sends the very bytes it sent before. A receipt made
// from raw bytes (Request.BodyDigest) keeps their digest, and a retry whose
// bytes have the same digest replays without being parsed, validated or
// canonicalized: the decode of a batch is most of what a replay over HTTP
// costs. Any other retry — other bytes for the same batch, a receipt made
// without a digest, or from before digests — takes Execute's path, which
// compares canonical fingerprints; so the digest only ever saves work, and
// never decides a mismatch.

// bodyDigestLen is the bytes of SHA-256 a receipt keeps: 128 bits, far
// beyond any accidental collision. A deliberate one could only confuse the
// principal that made it, whose key alone the receipt answers.
const bodyDigestLen = 16

// BodyDigest is the digest of a request's raw bytes (Request.BodyDigest).
func BodyDigest(body []byte) []byte {
	sum := sha256.Sum256(body)
	return sum[:bodyDigestLen]
}

// ReplayVerbatim answers a retry whose raw bytes digest to what the
// terminal receipt of (principal, tbl, key) recorded: the stored envelope,
// as Execute would replay it. ok=false — no receipt, one not terminal, or
// other bytes — leaves the request to Execute, as does a request Execute
// would refuse before any lookup (an invalid key or table name, or a
// FirstSent in the future), and on a store that reads several keys in one
// round trip (store.MultiGetter) every request for a key not answered
// here lately (recentKeys). The one difference:
// a batch that today's limits would refuse replays the answer it was given
// when they allowed it.
func (s *Service) ReplayVerbatim(ctx context.Context, principal, tbl, key string, firstSent time.Time, digest []byte) (Answer, bool) {
	ans, ok, _ := s.ReplayVerbatimOrSeen(ctx, principal, tbl, key, firstSent, digest)
	return ans, ok
}

// Seen is what ReplayVerbatimOrSeen read of a key it did not replay. Passed
// on in Request.Seen, it is where Execute's first round starts instead of
// reading the key again: a new key is then looked up once, not twice.
// Reading it a moment earlier changes nothing: every write Execute makes
// from it is conditioned on what it read (a receipt created only if still
// absent, one taken over only at the version read), and a condition that
// no longer holds sends Execute round again with a fresh read. The zero
// Seen is nothing seen.
type Seen struct {
	id   string
	rec  *Record
	ver  store.Version
	tomb *Tombstone
	// of is the (principal, table, key) id binds, when the lookup that
	// made this Seen had it: Execute then takes id instead of hashing the
	// triple again (idFor).
	of bindings
}

// bindings is the triple Bind hashes.
type bindings struct{ principal, table, key string }

// idFor is the transaction ID of (principal, tbl, key): s's, when s was
// read for that triple — the same ID Bind would compute, without its
// SHA-256 a second time per request — else Bind's.
func (s Seen) idFor(principal, tbl, key string) string {
	if s.id != "" && s.of == (bindings{principal, tbl, key}) {
		return s.id
	}
	return Bind(principal, tbl, key)
}

// ReplayVerbatimOrSeen is ReplayVerbatim, and when it does not replay, what
// it read of the key (the zero Seen when it read nothing).
func (s *Service) ReplayVerbatimOrSeen(ctx context.Context, principal, tbl, key string, firstSent time.Time, digest []byte) (Answer, bool, Seen) {
	if len(digest) != bodyDigestLen || !ValidKey(key) || !table.ValidTableName(tbl) ||
		firstSent.After(s.core.clock.Now().Add(firstSentSkewMax)) {
		return Answer{}, false, Seen{}
	}
	id := Bind(principal, tbl, key)
	if s.core.store.Capabilities().MultiGet != nil && !s.recent.has(id) {
		// Execute creates a new key there (etcd) before any lookup
		// (createfirst.go): a lookup of its own first would add a round
		// trip to every new request, to save a decode that costs far
		// less than one. A key answered here lately is most likely a
		// retry, which Execute would look up first anyway.
		return Answer{}, false, Seen{}
	}
	rec, ver, tomb, err := s.core.loadOrTomb(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return Answer{}, false, Seen{} // Execute reads again, and reports what it finds
	}
	seen := Seen{id: id, rec: rec, ver: ver, tomb: tomb, of: bindings{principal, tbl, key}}
	if rec == nil || rec.State != Terminal || rec.Principal != principal || rec.Table != tbl || rec.Key != key {
		return Answer{}, false, seen
	}
	if !bytes.Equal(rec.BodyDigest, digest) && !fault.Planted(fault.BugVerbatimIgnoresDigest) { // planted only under -tags idem_selftest
		return Answer{}, false, seen
	}
	act := dispatch(found{exists: true, sameRequest: true, state: Terminal, refuses: s.core.refusesWrites() != nil})
	if act != actReplay {
		return Answer{}, false, seen
	}
	ans, ok := s.core.settledAnswer(act, id, rec, nil)
	return ans, ok, seen
}

// seen takes what req.Seen holds of id, once: a later round reads afresh.
func (req *Request) seen(id string) (rec *Record, ver store.Version, tomb *Tombstone, ok bool) {
	sn := req.Seen
	req.Seen = Seen{}
	if sn.id == "" || sn.id != id {
		return nil, 0, nil, false
	}
	return sn.rec, sn.ver, sn.tomb, true
}
