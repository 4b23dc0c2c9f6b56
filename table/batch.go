package table

import (
	"encoding/json"
	"strconv"
	"sync/atomic"

	"github.com/idemdb/idem/code"
)

// Batch is the body of POST /v1/tables/{table}/batch.
//
// A Batch must not be modified once it has been validated: validation
// computes, once, the canonical form of every document and value (see
// internal/canonjson) that preflight, fingerprints and storage reuse.
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
	err     *code.Error
	docs    [][]byte // canonical document of each insert
	bytes   []byte   // canonical encoding of the whole batch
	digests []byte   // EntryDigests
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

// prepare computes what Validate keeps: the first refusal, or the batch's
// canonical form. Checking and writing are separate steps so that each can
// be read (and changed) without the other; forms lets them share the one
// parse of each document that both need.
func (b *Batch) prepare() *canonBatch {
	f := &forms{b: b}
	defer f.release()
	if err := b.validate(f); err != nil {
		return &canonBatch{err: err}
	}
	return b.build(f)
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
