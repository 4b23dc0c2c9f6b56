package canonjson

import (
	"bytes"
	"fmt"
	"slices"
)

func (p *parser) array(dst []byte) ([]byte, error) {
	if p.depth++; p.depth > DepthMax {
		return nil, errDepth
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

func (p *parser) keyOf(m member) []byte { return p.arena[m.kstart:m.kend] }

// object writes the members as they come and reorders them only when their
// keys were not sorted already, which is the common case for documents a
// program serialized.
func (p *parser) object(dst []byte) ([]byte, error) {
	if p.depth++; p.depth > DepthMax {
		return nil, errDepth
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
		// <= and not <: an equal key is a duplicate, which only the sort
		// below detects.
		if n := len(p.members); n > first && bytes.Compare(p.arena[m.kstart:m.kend], p.keyOf(p.members[n-1])) <= 0 {
			sorted = false
		}
		if len(p.members) > first {
			dst = append(dst, ',')
		}
		m.start = len(dst)
		dst = p.appendStr(dst, k)
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
	if sorted {
		return append(dst, '}'), nil
	}
	return p.reorder(dst, open, p.members[first:])
}

// reorder rewrites the members ms of the object opened at dst[open] in key
// order and closes it; a duplicate key is refused here, where sorting makes
// it adjacent to its twin.
func (p *parser) reorder(dst []byte, open int, ms []member) ([]byte, error) {
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
				return nil, &syntaxError{Offset: p.pos, Msg: fmt.Sprintf("duplicate object key %q", p.keyOf(m))}
			}
			dst = append(dst, ',')
		}
		dst = append(dst, region[m.start-base:m.end-base]...)
	}
	return append(dst, '}'), nil
}
