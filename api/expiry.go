package api

import (
	"strconv"
	"time"

	"github.com/idemdb/idem/receipt"
)

// The Idem-Key-Expiry response field says how long a keyed answer holds:
//
//	Idem-Key-Expiry: replay=@1767312000, protect=@1769904000
//
// replay: until then the same request with the same key gets this answer,
// byte for byte; protect: until then the key never executes again (after
// replay ends it is refused as idempotency_key_expired). Both are lower
// bounds — the cleaner may act later, never sooner.
//
// Why this shape (docs/receipts.md, "Expiry"):
//   - a Dictionary of RFC 9651 Dates (§3.2, §3.3.7): one field per key,
//     members a parser already knows, room for more members;
//   - absolute times, not a TTL (the draft's issue #49 floats
//     Idempotency-TTL): a replay hours later must carry the same bytes,
//     and a relative value would either change with every replay or lie;
//   - not Expires or Cache-Control (RFC 9111 §5.3, §5.2): those speak to
//     caches about the response's freshness, not to the client about its
//     key, and a cache would act on them;
//   - a name of our own: the IETF draft defines none (its issue #35 asks
//     for one), and a name that looks standard would collide with the
//     one it may define.
//
// A refusal of an expired key carries protect alone. In-progress and
// pending answers carry none: their envelope, and so its retention, is
// not known yet.

// keyExpiry renders e, or "" when it promises nothing. Seconds round
// down: a promise must not overstate.
func keyExpiry(e receipt.Expiry) string {
	if e == (receipt.Expiry{}) {
		return ""
	}
	var buf [len("replay=@, protect=@") + 2*20]byte // two int64s at most
	b := buf[:0]
	if !e.ReplayUntil.IsZero() {
		b = appendSFDate(append(b, "replay="...), e.ReplayUntil)
	}
	if !e.ProtectUntil.IsZero() {
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = appendSFDate(append(b, "protect="...), e.ProtectUntil)
	}
	return string(b)
}

func appendSFDate(b []byte, t time.Time) []byte {
	return strconv.AppendInt(append(b, '@'), t.Unix(), 10)
}
