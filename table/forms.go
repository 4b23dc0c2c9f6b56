package table

import (
	"slices"
	"sync"

	"github.com/idemdb/idem/internal/canonjson"
)

// forms gives validate and build the canonical form of each insert's
// document and each op's value. A batch DecodeBatch made holds them
// already. Any other batch's (one a host built in Go) are computed on first
// use and kept: validate asks for each only once the cheaper checks before
// it passed, so a batch refused early parses no more than it must, and
// build then finds every one computed, so no document is parsed twice.
//
// A form that fails is not kept: validate stops at the first failure and
// build runs only when there was none, so none is asked for twice.
type forms struct {
	b    *Batch
	s    *scratch // nil until a form is computed
	docs [][]byte // by insert; nil: not computed yet
	vals [][]byte // by op, counting through the transforms in order
}

// doc is insert i's document in canonical form.
func (f *forms) doc(i int) ([]byte, error) {
	raw := f.b.Inserts[i].Doc
	if f.b.canonicalInput {
		return raw, nil
	}
	f.alloc()
	return f.form(&f.docs[i], raw)
}

// value is the canonical form of raw, the value of the k-th op of the batch
// counting through its transforms in order.
func (f *forms) value(k int, raw []byte) ([]byte, error) {
	if f.b.canonicalInput {
		return raw, nil
	}
	f.alloc()
	return f.form(&f.vals[k], raw)
}

func (f *forms) form(dst *[]byte, raw []byte) ([]byte, error) {
	if *dst == nil {
		start := len(f.s.buf)
		out, err := canonjson.Append(f.s.buf, raw)
		if err != nil {
			return nil, err
		}
		f.s.buf, *dst = out, out[start:len(out):len(out)]
	}
	return *dst, nil
}

// scratch is the memory forms are computed in. build copies every form
// into the batch's own buffer, so none outlives prepare and the memory is
// reused by the next batch: a batch built in Go costs no more allocations
// than one DecodeBatch made.
type scratch struct {
	buf   []byte
	forms [][]byte
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

// scratchMax bounds the scratch kept for reuse: one huge batch must not pin
// its memory for the life of the process.
const scratchMax = 1 << 20

// alloc takes scratch on first use (a batch that needs no form takes
// none), sized at once: a slot per document and op, and buf as long as the
// input, which a canonical form barely exceeds (it drops whitespace and
// only re-escapes).
func (f *forms) alloc() {
	if f.s != nil {
		return
	}
	size, ops := 0, 0
	for _, in := range f.b.Inserts {
		size += len(in.Doc)
	}
	for _, tr := range f.b.Transforms {
		ops += len(tr.Ops)
		for _, op := range tr.Ops {
			size += len(op.Value)
		}
	}
	s := scratches.Get().(*scratch)
	n := len(f.b.Inserts) + ops
	s.forms = slices.Grow(s.forms[:0], n)[:n]
	s.buf = slices.Grow(s.buf[:0], size)
	f.s, f.docs, f.vals = s, s.forms[:len(f.b.Inserts)], s.forms[len(f.b.Inserts):]
}

// release gives the scratch back once build has copied the forms out.
func (f *forms) release() {
	s := f.s
	if s == nil {
		return
	}
	*f = forms{b: f.b}
	clear(s.forms) // nil is "not computed" to the next batch
	if cap(s.buf) > scratchMax || cap(s.forms) > scratchMax/24 {
		return
	}
	s.buf, s.forms = s.buf[:0], s.forms[:0]
	scratches.Put(s)
}
