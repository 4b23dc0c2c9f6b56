package table

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/idemdb/idem/code"
)

// Batch is the body of POST /v1/tables/{table}/batch.
type Batch struct {
	Inserts    []Insert    `json:"inserts,omitempty"`
	Deletes    []string    `json:"deletes,omitempty"`
	Transforms []Transform `json:"transforms,omitempty"`
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

// DecodeBatch parses a request body strictly: one JSON object, no unknown
// members, no trailing data. Failures are *code.Error invalid_request.
func DecodeBatch(data []byte) (*Batch, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var b Batch
	if err := dec.Decode(&b); err != nil {
		return nil, invalid("malformed batch body: %s", jsonErrText(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalid("malformed batch body: trailing data after the JSON object")
	}
	return &b, nil
}

func jsonErrText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return se.Error()
	}
	s := err.Error()
	return strings.TrimPrefix(s, "json: ")
}

// docCount is the number of documents the batch touches.
func (b *Batch) docCount() int { return len(b.Inserts) + len(b.Deletes) + len(b.Transforms) }

// Validate checks everything about the batch that does not depend on stored
// data. It is deterministic: the same batch always gets the same answer.
func (b *Batch) Validate() *code.Error {
	n := b.docCount()
	if n == 0 {
		return invalid("batch is empty: give inserts, deletes or transforms")
	}
	if n > BatchDocsMax {
		return invalid("batch touches %d documents (max %d)", n, BatchDocsMax)
	}
	seen := make(map[string]string, n)
	use := func(id, where string) *code.Error {
		if !ValidDocID(id) {
			return invalid("%s: invalid document id %q (1..%d of A-Z a-z 0-9 _ . : @ ~ -)", where, id, DocIDBytesMax)
		}
		if prev, dup := seen[id]; dup {
			return invalid("%s: document %q is also touched by %s", where, id, prev)
		}
		seen[id] = where
		return nil
	}
	for i, in := range b.Inserts {
		where := "inserts[" + itoa(i) + "]"
		if err := use(in.ID, where); err != nil {
			return err
		}
		if len(in.Doc) > DocBytesMax {
			return invalid("%s: document of %d bytes (max %d)", where, len(in.Doc), DocBytesMax)
		}
		if _, err := decodeObject(in.Doc); err != nil {
			return invalid("%s: doc must be a JSON object", where)
		}
	}
	for i, id := range b.Deletes {
		if err := use(id, "deletes["+itoa(i)+"]"); err != nil {
			return err
		}
	}
	for i, tr := range b.Transforms {
		where := "transforms[" + itoa(i) + "]"
		if err := use(tr.ID, where); err != nil {
			return err
		}
		if len(tr.Ops) == 0 || len(tr.Ops) > TransformOpsMax {
			return invalid("%s: %d ops (1..%d)", where, len(tr.Ops), TransformOpsMax)
		}
		for j, op := range tr.Ops {
			if err := op.validate(where + ".ops[" + itoa(j) + "]"); err != nil {
				return err
			}
		}
	}
	return nil
}

// Canonical returns the batch in canonical JSON: documents and values
// re-encoded with sorted object keys, so that two requests that mean the same
// thing have the same bytes (and so the same fingerprint). The batch must
// have passed Validate.
func (b *Batch) Canonical() ([]byte, error) {
	c := Batch{Deletes: b.Deletes}
	for _, in := range b.Inserts {
		doc, err := canonicalJSON(in.Doc)
		if err != nil {
			return nil, err
		}
		c.Inserts = append(c.Inserts, Insert{ID: in.ID, Doc: doc})
	}
	for _, tr := range b.Transforms {
		ct := Transform{ID: tr.ID, Upsert: tr.Upsert, Ops: make([]Op, len(tr.Ops))}
		for i, op := range tr.Ops {
			ct.Ops[i] = Op{Op: op.Op, Path: op.Path}
			if len(op.Value) > 0 {
				v, err := canonicalJSON(op.Value)
				if err != nil {
					return nil, err
				}
				ct.Ops[i].Value = v
			}
		}
		c.Transforms = append(c.Transforms, ct)
	}
	return json.Marshal(c)
}

// canonicalJSON re-encodes a JSON value with sorted keys and numbers kept
// as written.
func canonicalJSON(raw []byte) ([]byte, error) {
	v, err := decodeValue(raw)
	if err != nil {
		return nil, err
	}
	return marshalValue(v)
}

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
		return nil, errors.New("not an object")
	}
	return m, nil
}

// marshalValue encodes without HTML escaping (documents are data, not HTML).
func marshalValue(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
