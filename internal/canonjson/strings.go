package canonjson

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// str parses a string token and returns its decoded bytes (aliasing src when
// there is no escape, else a scratch copy valid until the next call). It
// sets p.plain when the token was plain ASCII (plainByte): then the token is
// its own canonical form, and appendStr copies it without a second look.
func (p *parser) str() ([]byte, error) {
	s := p.src
	i := p.pos + 1 // past the quote
	start := i
	for i < len(s) && plainByte[s[i]] {
		i++
	}
	if i < len(s) && s[i] == '"' {
		p.pos, p.plain = i+1, true
		return s[start:i], nil
	}
	p.plain = false
	for i < len(s) {
		c := s[i]
		if c == '"' {
			if !utf8.Valid(s[start:i]) {
				return nil, p.invalidUTF8(start, i)
			}
			p.pos = i + 1
			return s[start:i], nil
		}
		if c == '\\' {
			return p.strSlow(start)
		}
		if c < 0x20 {
			p.pos = i
			return nil, p.fail("control character in string")
		}
		i++
	}
	return nil, p.fail("unterminated string")
}

// plainByte marks the bytes a string token may hold that need no escape in
// and none out: ASCII from space on, but for the quote and the backslash.
// (encoding/json leaves DEL, 0x7f, as it is.)
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendStr appends the string str just returned, in canonical form.
func (p *parser) appendStr(dst, s []byte) []byte {
	if p.plain {
		return append(append(append(dst, '"'), s...), '"')
	}
	return AppendString(dst, s)
}

// strSlow decodes a string with escapes into the scratch buffer.
func (p *parser) strSlow(start int) ([]byte, error) {
	s := p.src
	out := append(p.key[:0], s[start:p.pos+1]...)[:0]
	i := start
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				// Escapes decode to whole characters, so the bad byte is
				// one of the input's own.
				return nil, p.invalidUTF8(start, i)
			}
			p.pos = i + 1
			p.key = out
			return out, nil
		case c < 0x20:
			p.pos = i
			return nil, p.fail("control character in string")
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(s) {
			break
		}
		i++
		var err error
		if out, i, err = p.escape(out, i); err != nil {
			return nil, err
		}
	}
	return nil, p.fail("unterminated string")
}

// escape decodes the escape whose letter is s[i] (just past the backslash)
// onto out and returns the offset past it.
func (p *parser) escape(out []byte, i int) ([]byte, int, error) {
	s := p.src
	switch s[i] {
	case '"', '\\', '/':
		return append(out, s[i]), i + 1, nil
	case 'b':
		return append(out, '\b'), i + 1, nil
	case 'f':
		return append(out, '\f'), i + 1, nil
	case 'n':
		return append(out, '\n'), i + 1, nil
	case 'r':
		return append(out, '\r'), i + 1, nil
	case 't':
		return append(out, '\t'), i + 1, nil
	case 'u':
		r, ok := hex4(s, i+1)
		if !ok {
			p.pos = i
			return nil, 0, p.fail("invalid \\u escape")
		}
		i += 5
		if utf16.IsSurrogate(r) {
			r2, ok2 := rune(-1), false
			if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
				r2, ok2 = hex4(s, i+2)
			}
			dec := utf16.DecodeRune(r, r2)
			if !ok2 || dec == utf8.RuneError {
				// encoding/json would read U+FFFD, so "\ud800" and
				// "\udc00" would be one request: refused instead.
				p.pos = i - 6
				return nil, 0, p.fail("lone UTF-16 surrogate escape " + string(s[i-6:i]) + " (only a high-low pair encodes a character)")
			}
			r = dec
			i += 6
		}
		return utf8.AppendRune(out, r), i, nil
	}
	p.pos = i
	return nil, 0, p.fail("invalid escape")
}

// invalidUTF8 is the error of the string src[start:end], naming its first
// byte that is not UTF-8.
func (p *parser) invalidUTF8(start, end int) error {
	for i := start; i < end; {
		r, n := utf8.DecodeRune(p.src[i:end])
		if r == utf8.RuneError && n == 1 {
			p.pos = i
			return p.fail(fmt.Sprintf("invalid UTF-8 byte 0x%02x in string", p.src[i]))
		}
		i += n
	}
	p.pos = start
	return p.fail("invalid UTF-8 in string")
}

func hex4(s []byte, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range s[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

const hexDigits = "0123456789abcdef"

// AppendString appends s (valid UTF-8) as a JSON string exactly as
// encoding/json encodes it with HTML escaping off: the canonical form of
// every string, keys included.
func AppendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = appendEscape(dst, b)
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRune(s[i:])
		// encoding/json escapes these two even with HTML escaping off
		// (JavaScript treats them as line ends).
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendEscape appends the escape of the ASCII byte b: a quote, a backslash
// or a control character.
func appendEscape(dst []byte, b byte) []byte {
	switch b {
	case '\\', '"':
		return append(dst, '\\', b)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
}
