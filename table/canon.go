package table

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// canonical JSON: one parse over the input that validates it and appends its
// canonical form — no insignificant whitespace, object members sorted by key
// (byte order of the decoded key), numbers exactly as written, strings
// re-escaped the way encoding/json does without HTML escaping. It replaces a
// decode into map[string]any and a re-encode, which cost a dozen allocations
// per document on the request path; fingerprints and stored documents are
// both made of it. Duplicate object keys are rejected (RFC 8259 says names
// SHOULD be unique; accepting them would make "the same request" ambiguous),
// and so are escapes of lone UTF-16 surrogates (encoding/json reads each as
// U+FFFD, which would make "\ud800" and "\udc00" the same request).

var errCanonDepth = fmt.Errorf("nesting deeper than %d levels (the limit for any document or value)", DocDepthMax)

// syntaxError says where JSON input is malformed.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("%s at offset %d", e.msg, e.off) }

// canonParser walks one JSON text.
type canonParser struct {
	src     []byte
	pos     int
	depth   int
	key     []byte   // scratch: a decoded string with escapes
	arena   []byte   // decoded keys of the objects being parsed
	members []member // members of the objects being parsed (a stack)
	region  []byte   // scratch: an unsorted object's members while they are reordered
	// numErr is the first number beyond the number limits. It does not stop
	// the parse: DecodeBatch still reads such a batch (a receipt stored
	// before the limits existed must stay readable) and Validate refuses it.
	numErr error
}

func (p *canonParser) fail(msg string) error { return &syntaxError{off: p.pos, msg: msg} }

func (p *canonParser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// appendCanonical appends the canonical form of the single JSON value src.
func appendCanonical(dst, src []byte) ([]byte, error) {
	p := parsers.Get().(*canonParser)
	defer p.release()
	p.src = src
	dst, err := p.value(dst)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(src) {
		return nil, p.fail("trailing data")
	}
	if p.numErr != nil {
		return nil, p.numErr
	}
	return dst, nil
}

// parsers keeps the scratch stacks of parsers between documents: a batch of
// ten documents would otherwise grow them ten times.
var parsers = sync.Pool{New: func() any { return new(canonParser) }}

// parserScratchMax bounds the scratch a pooled parser keeps: one huge
// document must not pin its stacks for the life of the process.
const parserScratchMax = 64 << 10

func (p *canonParser) release() {
	if cap(p.arena)+cap(p.region)+cap(p.members)*int(unsafe.Sizeof(member{})) > parserScratchMax {
		return
	}
	*p = canonParser{arena: p.arena[:0], members: p.members[:0], region: p.region[:0]}
	parsers.Put(p)
}

func (p *canonParser) value(dst []byte) ([]byte, error) {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return nil, p.fail("unexpected end of input")
	}
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object(dst)
	case c == '[':
		return p.array(dst)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return appendJSONString(dst, s), nil
	case c == 't':
		return p.literal(dst, "true")
	case c == 'f':
		return p.literal(dst, "false")
	case c == 'n':
		return p.literal(dst, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(dst)
	}
	return nil, p.fail("invalid character")
}

func (p *canonParser) literal(dst []byte, lit string) ([]byte, error) {
	if !bytes.HasPrefix(p.src[p.pos:], []byte(lit)) {
		return nil, p.fail("invalid literal")
	}
	p.pos += len(lit)
	return append(dst, lit...), nil
}

// number validates the JSON number grammar and appends it verbatim; a
// literal beyond the number limits is recorded in numErr.
func (p *canonParser) number(dst []byte) ([]byte, error) {
	start := p.pos
	n, ok := scanNumber(p.src, start)
	if !ok {
		return nil, p.fail("invalid number")
	}
	if msg := n.limitError(); msg != "" && p.numErr == nil {
		p.numErr = &syntaxError{off: start, msg: msg}
	}
	p.pos = n.end
	return append(dst, p.src[start:n.end]...), nil
}

// str parses a string token and returns its decoded bytes (aliasing src when
// there is no escape, else a scratch copy valid until the next call).
func (p *canonParser) str() ([]byte, error) {
	s := p.src
	i := p.pos + 1 // past the quote
	start := i
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

// strSlow decodes a string with escapes into the scratch buffer.
func (p *canonParser) strSlow(start int) ([]byte, error) {
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
		switch s[i] {
		case '"', '\\', '/':
			out = append(out, s[i])
			i++
		case 'b':
			out, i = append(out, '\b'), i+1
		case 'f':
			out, i = append(out, '\f'), i+1
		case 'n':
			out, i = append(out, '\n'), i+1
		case 'r':
			out, i = append(out, '\r'), i+1
		case 't':
			out, i = append(out, '\t'), i+1
		case 'u':
			r, ok := hex4(s, i+1)
			if !ok {
				p.pos = i
				return nil, p.fail("invalid \\u escape")
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
					return nil, p.fail("lone UTF-16 surrogate escape " + string(s[i-6:i]) + " (only a high-low pair encodes a character)")
				}
				r = dec
				i += 6
			}
			out = utf8.AppendRune(out, r)
		default:
			p.pos = i
			return nil, p.fail("invalid escape")
		}
	}
	return nil, p.fail("unterminated string")
}

// invalidUTF8 is the error of the string src[start:end], naming its first
// byte that is not UTF-8.
func (p *canonParser) invalidUTF8(start, end int) error {
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

func (p *canonParser) array(dst []byte) ([]byte, error) {
	if p.depth++; p.depth > DocDepthMax {
		return nil, errCanonDepth
	}
	defer func() { p.depth-- }()
	p.pos++ // [
	dst = append(dst, '[')
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
		return append(dst, ']'), nil
	}
	for {
		var err error
		if dst, err = p.value(dst); err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.src) {
			return nil, p.fail("unterminated array")
		}
		switch p.src[p.pos] {
		case ',':
			p.pos++
			dst = append(dst, ',')
		case ']':
			p.pos++
			return append(dst, ']'), nil
		default:
			return nil, p.fail("expected , or ] in array")
		}
	}
}

// member is one object member already written to dst[start:end]; its
// decoded key is arena[kstart:kend].
type member struct {
	kstart, kend int
	start, end   int
}

func (p *canonParser) keyOf(m member) []byte { return p.arena[m.kstart:m.kend] }

func (p *canonParser) object(dst []byte) ([]byte, error) {
	if p.depth++; p.depth > DocDepthMax {
		return nil, errCanonDepth
	}
	defer func() { p.depth-- }()
	p.pos++ // {
	open := len(dst)
	dst = append(dst, '{')
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		return append(dst, '}'), nil
	}
	first, arenaMark := len(p.members), len(p.arena)
	defer func() { p.members, p.arena = p.members[:first], p.arena[:arenaMark] }()
	sorted := true
	for {
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != '"' {
			return nil, p.fail("expected a string key")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		m := member{kstart: len(p.arena)}
		p.arena = append(p.arena, k...)
		m.kend = len(p.arena)
		if n := len(p.members); n > first && bytes.Compare(p.arena[m.kstart:m.kend], p.keyOf(p.members[n-1])) <= 0 {
			sorted = false
		}
		if len(p.members) > first {
			dst = append(dst, ',')
		}
		m.start = len(dst)
		dst = appendJSONString(dst, k)
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return nil, p.fail("expected : after object key")
		}
		p.pos++
		dst = append(dst, ':')
		if dst, err = p.value(dst); err != nil {
			return nil, err
		}
		m.end = len(dst)
		p.members = append(p.members, m)
		p.skipSpace()
		if p.pos >= len(p.src) {
			return nil, p.fail("unterminated object")
		}
		if p.src[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.src[p.pos] != '}' {
			return nil, p.fail("expected , or } in object")
		}
		p.pos++
		break
	}
	if !sorted {
		ms := p.members[first:]
		slices.SortStableFunc(ms, func(a, b member) int { return bytes.Compare(p.keyOf(a), p.keyOf(b)) })
		base := open + 1
		// Nested objects reorder inside their own members before this one
		// runs, so one scratch buffer per parser serves every depth.
		p.region = append(p.region[:0], dst[base:]...)
		region := p.region
		dst = dst[:base]
		for i, m := range ms {
			if i > 0 {
				if bytes.Equal(p.keyOf(m), p.keyOf(ms[i-1])) {
					return nil, &syntaxError{off: p.pos, msg: fmt.Sprintf("duplicate object key %q", p.keyOf(m))}
				}
				dst = append(dst, ',')
			}
			dst = append(dst, region[m.start-base:m.end-base]...)
		}
	}
	return append(dst, '}'), nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString encodes s exactly as encoding/json does with HTML
// escaping off (s is valid UTF-8).
func appendJSONString(dst, s []byte) []byte {
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
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRune(s[i:])
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
