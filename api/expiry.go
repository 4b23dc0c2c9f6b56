package api

import (
	"math"
	"strconv"
	"sync/atomic"
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
// down: a promise must not overstate. The answers of one second promise
// the same seconds, so the text of the last one is kept and handed out
// again: a keyed answer then costs no formatting and no allocation for
// this field (issue 41's precomputed header values).
func keyExpiry(e receipt.Expiry) string {
	if e == (receipt.Expiry{}) {
		return ""
	}
	replay, protect := expirySecond(e.ReplayUntil), expirySecond(e.ProtectUntil)
	if last := lastKeyExpiry.Load(); last != nil && last.replay == replay && last.protect == protect {
		return last.text
	}
	text := renderKeyExpiry(e)
	lastKeyExpiry.Store(&keyExpiryText{replay: replay, protect: protect, text: text})
	return text
}

// keyExpiryText is one rendered Idem-Key-Expiry and the seconds it says.
type keyExpiryText struct {
	replay, protect int64 // Unix seconds, noExpirySecond for a member left out
	text            string
}

// lastKeyExpiry is the text keyExpiry rendered last; shared by every
// server of the process, since the text is a pure function of the seconds.
var lastKeyExpiry atomic.Pointer[keyExpiryText]

// noExpirySecond stands for a zero time: no Unix second of a receipt's
// promise is that far in the past.
const noExpirySecond = math.MinInt64

func expirySecond(t time.Time) int64 {
	if t.IsZero() {
		return noExpirySecond
	}
	return t.Unix()
}

// renderKeyExpiry formats e's members (keyExpiry's cache misses).
func renderKeyExpiry(e receipt.Expiry) string {
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
