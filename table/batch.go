package table

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"

	"github.com/idemdb/idem/code"
)

// Batch is the body of POST /v1/tables/{table}/batch.
//
// A Batch must not be modified once it has been validated: validation
// computes, once, the canonical form of every document and value (see
// canon.go) that preflight, fingerprints and storage reuse.
type Batch struct {
	Inserts    []Insert    `json:"inserts,omitempty"`
	Deletes    []string    `json:"deletes,omitempty"`
	Transforms []Transform `json:"transforms,omitempty"`

	canon          atomic.Pointer[canonBatch] // set once by Validate; safe to share
	canonicalInput bool                       // documents and values are canonical already (DecodeBatch)
	numErr         error                      // DecodeBatch read a number beyond the number limits
}

// Insert creates or replaces a document.
type Insert struct {
	ID  string          `json:"id"`
	Doc json.RawMessage `json:"doc"`
}

// Transform applies ops to one document, creating it from {} when Upsert is
// set and it does not exist.
type Transform struct {
	ID     string `json:"id"`
	Ops    []Op   `json:"ops"`
	Upsert bool   `json:"upsert,omitempty"`
}

// Op is one transform op on a dotted path.
type Op struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"`
}

// Result is the answer of an executed batch.
type Result struct {
	Inserted    int `json:"inserted"`
	Deleted     int `json:"deleted"`
	Transformed int `json:"transformed"`
}

// Add sums r and o.
func (r Result) Add(o Result) Result {
	return Result{r.Inserted + o.Inserted, r.Deleted + o.Deleted, r.Transformed + o.Transformed}
}

// AppendJSON appends r as {"inserted":n,"deleted":n,"transformed":n}.
func (r Result) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"inserted":`...)
	dst = strconv.AppendInt(dst, int64(r.Inserted), 10)
	dst = append(dst, `,"deleted":`...)
	dst = strconv.AppendInt(dst, int64(r.Deleted), 10)
	dst = append(dst, `,"transformed":`...)
	dst = strconv.AppendInt(dst, int64(r.Transformed), 10)
	return append(dst, '}')
}

// canonBatch is what validation computed, once.
type canonBatch struct {
	err   *code.Error
	docs  [][]byte // canonical document of each insert
	bytes []byte   // canonical encoding of the whole batch
}

// docCount is the number of documents the batch touches.
func (b *Batch) docCount() int { return len(b.Inserts) + len(b.Deletes) + len(b.Transforms) }

// Validate checks everything about the batch that does not depend on stored
// data. It is deterministic: the same batch always gets the same answer.
func (b *Batch) Validate() *code.Error {
	c := b.canon.Load()
	if c == nil {
		// Concurrent first calls compute the same value; one is kept.
		b.canon.CompareAndSwap(nil, b.prepare())
		c = b.canon.Load()
	}
	return c.err
}

// Canonical returns the batch in canonical JSON: every document and value
// re-encoded canonically (sorted object keys, no whitespace, numbers as
// written), so that two requests that mean the same thing have the same bytes
// (and so the same fingerprint). The batch must be valid.
func (b *Batch) Canonical() ([]byte, error) {
	if cerr := b.Validate(); cerr != nil {
		return nil, cerr
	}
	return b.canon.Load().bytes, nil
}

// canonicalDoc is insert i's canonical document (after Validate).
func (b *Batch) canonicalDoc(i int) []byte { return b.canon.Load().docs[i] }

func (b *Batch) prepare() *canonBatch {
	c := &canonBatch{}
	n := b.docCount()
	if n == 0 {
		c.err = invalid("batch is empty: give inserts, deletes or transforms")
		return c
	}
	if n > BatchDocsMax {
		c.err = invalid("batch touches %d documents (max %d)", n, BatchDocsMax)
		return c
	}
	if b.numErr != nil {
		c.err = invalid("batch body: %v", b.numErr)
		return c
	}
	seen := make(map[string]place, n)
	use := func(id string, where place) *code.Error {
		if !ValidDocID(id) {
			return invalid("%s: invalid document id %q (1..%d of A-Z a-z 0-9 _ . : @ ~ -, not \".\" or \"..\")", where, id, DocIDBytesMax)
		}
		if prev, dup := seen[id]; dup {
			return invalid("%s: document %q is also touched by %s", where, id, prev)
		}
		seen[id] = where
		return nil
	}
	// One buffer holds the canonical batch; documents alias into it.
	out := make([]byte, 0, 64+b.rawSize())
	out = append(out, '{')
	if len(b.Inserts) > 0 {
		out = append(out, `"inserts":[`...)
		c.docs = make([][]byte, len(b.Inserts))
		for i, in := range b.Inserts {
			where := place{list: "inserts", i: i, op: -1}
			if c.err = use(in.ID, where); c.err != nil {
				return c
			}
			if len(in.Doc) > DocBytesMax {
				c.err = invalid("%s: document of %d bytes (max %d)", where, len(in.Doc), DocBytesMax)
				return c
			}
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, `{"id":`...)
			out = appendJSONString(out, []byte(in.ID))
			out = append(out, `,"doc":`...)
			start := len(out)
			var err error
			if out, err = b.appendDoc(out, in.Doc); err != nil {
				c.err = invalid("%s: doc %v", where, err)
				return c
			}
			c.docs[i] = out[start:len(out):len(out)]
			out = append(out, '}')
		}
		out = append(out, ']')
	}
	if len(b.Deletes) > 0 {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, `"deletes":[`...)
		for i, id := range b.Deletes {
			if c.err = use(id, place{list: "deletes", i: i, op: -1}); c.err != nil {
				return c
			}
			if i > 0 {
				out = append(out, ',')
			}
			out = appendJSONString(out, []byte(id))
		}
		out = append(out, ']')
	}
	if len(b.Transforms) > 0 {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, `"transforms":[`...)
		for i, tr := range b.Transforms {
			where := place{list: "transforms", i: i, op: -1}
			if c.err = use(tr.ID, where); c.err != nil {
				return c
			}
			if len(tr.Ops) == 0 || len(tr.Ops) > TransformOpsMax {
				c.err = invalid("%s: %d ops (1..%d)", where, len(tr.Ops), TransformOpsMax)
				return c
			}
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, `{"id":`...)
			out = appendJSONString(out, []byte(tr.ID))
			out = append(out, `,"ops":[`...)
			for j, op := range tr.Ops {
				if j > 0 {
					out = append(out, ',')
				}
				var cerr *code.Error
				if out, cerr = op.appendCanonical(out, place{list: "transforms", i: i, op: j}, b.canonicalInput); cerr != nil {
					c.err = cerr
					return c
				}
			}
			out = append(out, ']')
			if tr.Upsert {
				out = append(out, `,"upsert":true`...)
			}
			out = append(out, '}')
		}
		out = append(out, ']')
	}
	c.bytes = append(out, '}')
	return c
}

// place names where in a batch a check failed, e.g. transforms[2].ops[0].
// It is formatted only when an error is: validating a good batch builds no
// strings.
type place struct {
	list  string // inserts, deletes or transforms
	i, op int    // op < 0: the entry itself
}

func (p place) String() string {
	s := p.list + "[" + strconv.Itoa(p.i) + "]"
	if p.op >= 0 {
		s += ".ops[" + strconv.Itoa(p.op) + "]"
	}
	return s
}

func (b *Batch) rawSize() int {
	n := 0
	for _, in := range b.Inserts {
		n += len(in.ID) + len(in.Doc) + 20
	}
	for _, id := range b.Deletes {
		n += len(id) + 3
	}
	for _, tr := range b.Transforms {
		n += len(tr.ID) + 30
		for _, op := range tr.Ops {
			n += len(op.Op) + len(op.Path) + len(op.Value) + 30
		}
	}
	return n
}

// appendDoc appends a document's canonical form; one DecodeBatch produced is
// canonical already (canonicalization is idempotent) and only copied. Its
// error completes "doc …".
func (b *Batch) appendDoc(dst, doc []byte) ([]byte, error) {
	switch k := jsonKind(doc); {
	case len(bytes.TrimLeft(doc, jsonSpace)) == 0:
		return nil, errors.New("must be a JSON object and is missing")
	case k != "an object" && k != "":
		return nil, errors.New("must be a JSON object, not " + k)
	}
	if b.canonicalInput {
		return append(dst, doc...), nil
	}
	dst, err := appendCanonical(dst, doc)
	if err != nil {
		return nil, fmt.Errorf("is not acceptable JSON: %w", err)
	}
	return dst, nil
}

const jsonSpace = " \t\n\r"

// jsonKind names the type of the JSON value raw starts with ("" if it
// starts none), for messages that say what was given instead of what was
// wanted.
func jsonKind(raw []byte) string {
	raw = bytes.TrimLeft(raw, jsonSpace)
	if len(raw) == 0 {
		return ""
	}
	switch c := raw[0]; {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	}
	return ""
}

// DecodeBatch parses a request body strictly: one JSON object, no unknown
// members, no trailing data. Failures are *code.Error invalid_request. The
// batch comes back validated-shape-wise and with its documents already in
// canonical form; Validate still checks the limits.
func DecodeBatch(data []byte) (*Batch, error) {
	// Canonical documents are about as long as the body they come from.
	d := batchDecoder{
		p:   canonParser{src: data, arena: make([]byte, 0, 256), members: make([]member, 0, 16)},
		buf: make([]byte, 0, len(data)),
	}
	b, err := d.batch()
	if err != nil {
		return nil, invalid("malformed batch body: %v", err)
	}
	return b, nil
}

// canonicalJSON re-encodes a JSON value canonically.
func canonicalJSON(raw []byte) ([]byte, error) { return appendCanonical(nil, raw) }

// decodeValue decodes a JSON value for transforms (numbers as json.Number).
func decodeValue(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

func decodeObject(raw []byte) (map[string]any, error) {
	v, err := decodeValue(raw)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("it is " + typeName(v))
	}
	return m, nil
}

// marshalValue encodes canonically (sorted keys, no HTML escaping).
func marshalValue(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func itoa(i int) string { return strconv.Itoa(i) }
