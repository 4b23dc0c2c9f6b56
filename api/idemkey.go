package api

import (
	"fmt"
	"strings"

	"github.com/idemdb/idem/receipt"
)

// parseIdempotencyKey reads the Idempotency-Key header's values. The IETF
// draft (draft-ietf-httpapi-idempotency-key-header) makes the field an RFC
// 8941 Item whose value is a String, so in `Idempotency-Key: "abc"` the
// quotes are syntax and the key is abc. A value that does not start with a
// quote is taken verbatim as a bare key, for the clients (and the Stripe
// convention) that send one; both spellings of a key bind the same receipt.
//
// Idem's keys are 1..255 visible ASCII characters either way: an sf-string
// may also hold spaces, which a key may not. Parameters (`"abc";p=1`) are
// refused rather than ignored, so that no two different field values name
// the same key silently.
func parseIdempotencyKey(values []string) (string, error) {
	if len(values) != 1 {
		return "", fmt.Errorf("send exactly one Idempotency-Key header, not %d", len(values))
	}
	v := strings.Trim(values[0], " \t")
	key := v
	if strings.HasPrefix(v, `"`) {
		var err error
		if key, err = parseSFString(v); err != nil {
			return "", err
		}
	}
	if !receipt.ValidKey(key) {
		return "", fmt.Errorf("an Idempotency-Key is 1..%d visible ASCII characters (no spaces), as an RFC 8941 string (\"abc\") or bare (abc)", receipt.KeyBytesMax)
	}
	return key, nil
}

// parseSFString parses a whole field value that is one RFC 8941 §3.3.3
// sf-string: DQUOTE *( unescaped / "\" ( DQUOTE / "\" ) ) DQUOTE, where
// unescaped is %x20-21 / %x23-5B / %x5D-7E.
func parseSFString(v string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i == len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", fmt.Errorf("Idempotency-Key string: a backslash may only escape \" or \\ (RFC 8941 §3.3.3)")
			}
			b.WriteByte(v[i])
		case c == '"':
			if rest := v[i+1:]; rest != "" {
				if strings.HasPrefix(rest, ";") {
					return "", fmt.Errorf("Idempotency-Key takes no parameters")
				}
				return "", fmt.Errorf("Idempotency-Key: unexpected %q after the closing quote", rest)
			}
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("Idempotency-Key string: byte 0x%02x is not allowed (RFC 8941 §3.3.3: printable ASCII only)", c)
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("Idempotency-Key string: missing the closing quote")
}
