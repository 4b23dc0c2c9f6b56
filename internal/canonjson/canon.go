package canonjson

import (
	"bytes"
	"sync"
	"unsafe"
)

// Append appends the canonical form of the single JSON value src to dst
// (see the package documentation for what canonical means and what is
// refused). On error it returns nil: dst's spare capacity may hold garbage.
func Append(dst, src []byte) ([]byte, error) {
	p := parsers.Get().(*parser)
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

// parser walks one JSON text and appends its canonical form in the same
// pass: it replaced a decode into map[string]any and a re-encode, which cost
// a dozen allocations per document on the request path.
type parser struct {
	src     []byte
	pos     int
	depth   int
	key     []byte   // scratch: a decoded string with escapes
	plain   bool     // the string str returned last was plain ASCII
	arena   []byte   // decoded keys of the objects being parsed
	members []member // members of the objects being parsed (a stack)
	region  []byte   // scratch: an unsorted object's members while they are reordered
	// numErr is the first number beyond the number limits. It does not stop
	// the parse: a Decoder still reads such a body (a receipt stored before
	// the limits existed must stay readable) and its caller refuses it.
	numErr error
}

// parsers keeps the scratch stacks of parsers between documents: a batch of
// ten documents would otherwise grow them ten times.
var parsers = sync.Pool{New: func() any { return new(parser) }}

// parserScratchMax bounds the scratch a pooled parser keeps: one huge
// document must not pin its stacks for the life of the process.
const parserScratchMax = 64 << 10

func (p *parser) release() {
	if cap(p.arena)+cap(p.region)+cap(p.members)*int(unsafe.Sizeof(member{})) > parserScratchMax {
		return
	}
	*p = parser{arena: p.arena[:0], members: p.members[:0], region: p.region[:0]}
	parsers.Put(p)
}

func (p *parser) fail(msg string) error { return &syntaxError{Offset: p.pos, Msg: msg} }

func (p *parser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(dst []byte) ([]byte, error) {
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
		return p.appendStr(dst, s), nil
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

func (p *parser) literal(dst []byte, lit string) ([]byte, error) {
	if !bytes.HasPrefix(p.src[p.pos:], []byte(lit)) {
		return nil, p.fail("invalid literal")
	}
	p.pos += len(lit)
	return append(dst, lit...), nil
}

// number validates the JSON number grammar and appends it verbatim; a
// literal beyond the number limits is recorded in numErr.
func (p *parser) number(dst []byte) ([]byte, error) {
	start := p.pos
	n, ok := ScanNumber(p.src, start)
	if !ok {
		return nil, p.fail("invalid number")
	}
	if msg := n.LimitMessage(); msg != "" && p.numErr == nil {
		p.numErr = &syntaxError{Offset: start, Msg: msg}
	}
	p.pos = n.End
	return append(dst, p.src[start:n.End]...), nil
}
