package canonjson

import "unsafe"

// Decoder reads one JSON object of a known shape in a single pass: the
// caller names, member by member, what it expects (Object, Array,
// ReadString, ReadBool), and the values it keeps opaque come out already
// canonical (ReadValue). It is as strict as Append, and stricter about the
// shape: member names match exactly (encoding/json matches them
// case-insensitively) and a repeated name is refused.
type Decoder struct {
	p   parser
	buf []byte // every canonical value ReadValue and string ReadString returned, back to back
	// shell is the pooled parser whose scratch stacks p borrowed; Release
	// gives them back through it (nil: none borrowed).
	shell *parser
}

// Reset makes d read data, forgetting anything it read before (the values
// ReadValue returned stay valid). A Decoder held by value and Reset costs
// no allocation of its own.
func (d *Decoder) Reset(data []byte) {
	// The scratch stacks come from the parsers' pool (Release returns
	// them); the values go to a buffer of the body's size — canonical
	// values are about as long as the body they come from — which they
	// outlive the Decoder in.
	shell := parsers.Get().(*parser)
	*d = Decoder{
		p:     parser{src: data, arena: shell.arena[:0], members: shell.members[:0], region: shell.region[:0]},
		buf:   make([]byte, 0, len(data)),
		shell: shell,
	}
	*shell = parser{}
}

// Release gives the Decoder's scratch back for the next Reset; the values
// it returned stay valid. The Decoder must not be used again until Reset.
func (d *Decoder) Release() {
	if d.shell == nil {
		return
	}
	shell := d.shell
	shell.arena, shell.members, shell.region = d.p.arena, d.p.members, d.p.region
	d.p, d.shell = parser{}, nil
	shell.release()
}

// namesTracked is how many member names of one object Object remembers to
// refuse a repeat: more than any shape a Decoder reads has.
const namesTracked = 8

// Object reads an object, calling fn with each member's name; fn must
// consume the member's value (or fail, typically for a name it does not
// know).
func (d *Decoder) Object(fn func(key string) error) error {
	p := &d.p
	p.skipSpace()
	if p.pos >= len(p.src) || p.src[p.pos] != '{' {
		return p.fail("expected an object")
	}
	if p.depth++; p.depth > DepthMax {
		return errDepth
	}
	defer func() { p.depth-- }()
	p.pos++
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		return nil
	}
	var seen [namesTracked]string
	n := 0
	for {
		key, err := d.memberName()
		if err != nil {
			return err
		}
		for _, s := range seen[:min(n, len(seen))] {
			if s == key {
				return duplicateField(key)
			}
		}
		if n < len(seen) {
			seen[n] = key
		}
		n++
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return p.fail("expected : after object key")
		}
		p.pos++
		if err := fn(key); err != nil {
			return err
		}
		if more, err := d.next('}', "unterminated object", "expected , or } in object"); !more {
			return err
		}
	}
}

func (d *Decoder) memberName() (string, error) {
	p := &d.p
	p.skipSpace()
	if p.pos >= len(p.src) || p.src[p.pos] != '"' {
		return "", p.fail("expected a string key")
	}
	k, err := p.str()
	if err != nil {
		return "", err
	}
	return intern(k), nil
}

// intern returns the member names every batch repeats as constants, so
// that decoding them allocates nothing (the compiler compares string(k)
// in a switch without converting); any other name is a new string.
func intern(k []byte) string {
	switch string(k) {
	case "id":
		return "id"
	case "doc":
		return "doc"
	case "ops":
		return "ops"
	case "op":
		return "op"
	case "path":
		return "path"
	case "value":
		return "value"
	case "upsert":
		return "upsert"
	case "inserts":
		return "inserts"
	case "deletes":
		return "deletes"
	case "transforms":
		return "transforms"
	case "table":
		return "table"
	}
	return string(k)
}

// next consumes the separator after a member or element: more is true after
// a comma; after the closing byte it is false with a nil error.
func (d *Decoder) next(closing byte, unterminated, expected string) (more bool, err error) {
	p := &d.p
	p.skipSpace()
	if p.pos >= len(p.src) {
		return false, p.fail(unterminated)
	}
	switch p.src[p.pos] {
	case ',':
		p.pos++
		return true, nil
	case closing:
		p.pos++
		return false, nil
	}
	return false, p.fail(expected)
}

// Array reads an array, calling fn to consume each element. null reads as
// an empty array, as encoding/json reads it into a slice.
func (d *Decoder) Array(fn func() error) error {
	p := &d.p
	p.skipSpace()
	if d.null() {
		return nil
	}
	if p.pos >= len(p.src) || p.src[p.pos] != '[' {
		return p.fail("expected an array")
	}
	if p.depth++; p.depth > DepthMax {
		return errDepth
	}
	defer func() { p.depth-- }()
	p.pos++
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
		return nil
	}
	for {
		if err := fn(); err != nil {
			return err
		}
		if more, err := d.next(']', "unterminated array", "expected , or ] in array"); !more {
			return err
		}
	}
}

func (d *Decoder) null() bool {
	p := &d.p
	if len(p.src)-p.pos >= 4 && string(p.src[p.pos:p.pos+4]) == "null" {
		p.pos += 4
		return true
	}
	return false
}

// ReadString reads a string. Its bytes go to the buffer ReadValue's values
// share, so that the strings of a body (a batch's ten document IDs, say)
// cost no allocation each; the buffer's bytes are never written again once
// returned, which is what makes them a string's.
func (d *Decoder) ReadString() (string, error) {
	p := &d.p
	p.skipSpace()
	if p.pos >= len(p.src) || p.src[p.pos] != '"' {
		return "", p.fail("expected a string")
	}
	s, err := p.str()
	if err != nil || len(s) == 0 {
		return "", err
	}
	start := len(d.buf)
	d.buf = append(d.buf, s...)
	return unsafe.String(&d.buf[start], len(s)), nil
}

// ReadBool reads true or false.
func (d *Decoder) ReadBool() (bool, error) {
	p := &d.p
	p.skipSpace()
	switch {
	case len(p.src)-p.pos >= 4 && string(p.src[p.pos:p.pos+4]) == "true":
		p.pos += 4
		return true, nil
	case len(p.src)-p.pos >= 5 && string(p.src[p.pos:p.pos+5]) == "false":
		p.pos += 5
		return false, nil
	}
	return false, p.fail("expected true or false")
}

// ReadValue reads any value and returns its canonical form (JSON null is
// "null", as encoding/json keeps it in a RawMessage). The bytes stay valid
// for the Decoder's life. Nesting is counted from the value itself, not from
// the object around it, so that the deepest value accepted is the same
// however it is sent.
func (d *Decoder) ReadValue() ([]byte, error) {
	start := len(d.buf)
	outer := d.p.depth
	d.p.depth = 0
	defer func() { d.p.depth = outer }()
	var err error
	if d.buf, err = d.p.value(d.buf); err != nil {
		return nil, err
	}
	return d.buf[start:len(d.buf):len(d.buf)], nil
}

// End checks that nothing but whitespace follows the object read.
func (d *Decoder) End() error {
	d.p.skipSpace()
	if d.p.pos != len(d.p.src) {
		return d.p.fail("trailing data after the JSON object")
	}
	return nil
}

// LimitErr is the first number read beyond the number limits, or nil. Such
// a number does not stop the decoding: a body stored before the limits
// existed must stay readable, so refusing it is the caller's decision.
func (d *Decoder) LimitErr() error { return d.p.numErr }
