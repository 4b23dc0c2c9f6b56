package table

import (
	"errors"
	"fmt"
)

// batchDecoder reads a batch body in one pass with the canonical parser:
// the shape is checked strictly (no unknown members — names match exactly,
// unlike encoding/json's case-insensitive matching), and documents and op
// values come out already canonical.
type batchDecoder struct {
	p   canonParser
	buf []byte // every canonical document and value, back to back
}

func (d *batchDecoder) batch() (*Batch, error) {
	b := &Batch{canonicalInput: true}
	err := d.object(func(key string) error {
		switch key {
		case "inserts":
			return d.array(func() error {
				var in Insert
				err := d.object(func(key string) error {
					switch key {
					case "id":
						return d.stringInto(&in.ID)
					case "doc":
						v, err := d.rawCanonical()
						in.Doc = v
						return err
					}
					return unknownField(key)
				})
				b.Inserts = append(b.Inserts, in)
				return err
			})
		case "deletes":
			return d.array(func() error {
				var id string
				err := d.stringInto(&id)
				b.Deletes = append(b.Deletes, id)
				return err
			})
		case "transforms":
			return d.array(func() error {
				var tr Transform
				err := d.object(func(key string) error {
					switch key {
					case "id":
						return d.stringInto(&tr.ID)
					case "upsert":
						return d.boolInto(&tr.Upsert)
					case "ops":
						return d.array(func() error {
							var op Op
							err := d.object(func(key string) error {
								switch key {
								case "op":
									return d.stringInto(&op.Op)
								case "path":
									return d.stringInto(&op.Path)
								case "value":
									v, err := d.rawCanonical()
									op.Value = v
									return err
								}
								return unknownField(key)
							})
							tr.Ops = append(tr.Ops, op)
							return err
						})
					}
					return unknownField(key)
				})
				b.Transforms = append(b.Transforms, tr)
				return err
			})
		}
		return unknownField(key)
	})
	if err != nil {
		return nil, err
	}
	d.p.skipSpace()
	if d.p.pos != len(d.p.src) {
		return nil, d.p.fail("trailing data after the JSON object")
	}
	b.numErr = d.p.numErr
	return b, nil
}

func unknownField(key string) error { return fmt.Errorf("unknown field %q", key) }

var errNotObject = errors.New("expected an object")

// object walks an object's members; fn must consume each member's value.
// A repeated member is an error.
func (d *batchDecoder) object(fn func(key string) error) error {
	p := &d.p
	p.skipSpace()
	if p.pos >= len(p.src) || p.src[p.pos] != '{' {
		return p.fail("expected an object")
	}
	if p.depth++; p.depth > DocDepthMax {
		return errCanonDepth
	}
	defer func() { p.depth-- }()
	p.pos++
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		return nil
	}
	var seen [8]string
	n := 0
	for {
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != '"' {
			return p.fail("expected a string key")
		}
		k, err := p.str()
		if err != nil {
			return err
		}
		key := string(k)
		for _, s := range seen[:min(n, len(seen))] {
			if s == key {
				return fmt.Errorf("duplicate field %q", key)
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
		p.skipSpace()
		if p.pos >= len(p.src) {
			return p.fail("unterminated object")
		}
		if p.src[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.src[p.pos] != '}' {
			return p.fail("expected , or } in object")
		}
		p.pos++
		return nil
	}
}

// array walks an array (null counts as empty); fn consumes one element.
func (d *batchDecoder) array(fn func() error) error {
	p := &d.p
	p.skipSpace()
	if d.null() {
		return nil
	}
	if p.pos >= len(p.src) || p.src[p.pos] != '[' {
		return p.fail("expected an array")
	}
	if p.depth++; p.depth > DocDepthMax {
		return errCanonDepth
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
		p.skipSpace()
		if p.pos >= len(p.src) {
			return p.fail("unterminated array")
		}
		switch p.src[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return nil
		default:
			return p.fail("expected , or ] in array")
		}
	}
}

func (d *batchDecoder) null() bool {
	p := &d.p
	if len(p.src)-p.pos >= 4 && string(p.src[p.pos:p.pos+4]) == "null" {
		p.pos += 4
		return true
	}
	return false
}

func (d *batchDecoder) stringInto(dst *string) error {
	p := &d.p
	p.skipSpace()
	if p.pos >= len(p.src) || p.src[p.pos] != '"' {
		return p.fail("expected a string")
	}
	s, err := p.str()
	if err != nil {
		return err
	}
	*dst = string(s)
	return nil
}

func (d *batchDecoder) boolInto(dst *bool) error {
	p := &d.p
	p.skipSpace()
	switch {
	case len(p.src)-p.pos >= 4 && string(p.src[p.pos:p.pos+4]) == "true":
		p.pos += 4
		*dst = true
	case len(p.src)-p.pos >= 5 && string(p.src[p.pos:p.pos+5]) == "false":
		p.pos += 5
		*dst = false
	default:
		return p.fail("expected true or false")
	}
	return nil
}

// rawCanonical consumes one value and returns its canonical bytes (JSON null
// stays "null", as encoding/json keeps it in a RawMessage). Its nesting is
// counted from the value itself, not from the batch around it, so that the
// deepest document an insert accepts is the same however it is sent.
func (d *batchDecoder) rawCanonical() ([]byte, error) {
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
