package table

import (
	"fmt"
	"slices"
	"sync"

	"github.com/idemdb/idem/internal/canonjson"
)

// DecodeBatch parses a request body strictly: one JSON object, no unknown
// members, no trailing data. Failures are *code.Error invalid_request. The
// batch comes back validated-shape-wise and with its documents already in
// canonical form; Validate still checks the limits.
func DecodeBatch(data []byte) (*Batch, error) {
	d := batchDecoder{b: &Batch{canonicalInput: true}}
	d.dec.Reset(data)
	d.inserts = insertScratch.Get().(*[]Insert)
	b, err := d.batch()
	d.dec.Release()
	*d.inserts = resetInserts(*d.inserts)
	insertScratch.Put(d.inserts)
	if err != nil {
		return nil, invalid("malformed batch body: %v", err)
	}
	return b, nil
}

// batchDecoder maps a body onto a Batch in one pass: canonjson checks the
// JSON, and one method per element of the batch's shape names the members
// that element may have. The element being filled is always the last of its
// list (appended before its members are read), so the methods can be
// passed as they are and need no closures over it.
type batchDecoder struct {
	dec canonjson.Decoder // by value: DecodeBatch's one allocation fewer
	b   *Batch
	// inserts collects the inserts, copied into the batch at its end: one
	// allocation of the right size instead of a slice grown by doubling.
	inserts *[]Insert
}

// insertScratch keeps the decoders' inserts scratch between bodies.
var insertScratch = sync.Pool{New: func() any { return new([]Insert) }}

// insertScratchMax bounds the scratch a pooled slice keeps, so one huge
// batch does not pin its slice for the life of the process.
const insertScratchMax = 1024

// resetInserts empties s for reuse: its elements zeroed (they hold the last
// batch's strings and documents, which must not stay reachable from the
// pool), or nil when it grew past insertScratchMax.
func resetInserts(s []Insert) []Insert {
	if cap(s) > insertScratchMax {
		return nil
	}
	clear(s)
	return s[:0]
}

func (d *batchDecoder) batch() (*Batch, error) {
	if err := d.dec.Object(d.batchMember); err != nil {
		return nil, err
	}
	if err := d.dec.End(); err != nil {
		return nil, err
	}
	if ins := *d.inserts; len(ins) > 0 {
		d.b.Inserts = slices.Clone(ins)
	}
	d.b.numErr = d.dec.LimitErr()
	return d.b, nil
}

func unknownField(key string) error { return fmt.Errorf("unknown field %q", key) }

// batchMember reads a member of the batch object.
func (d *batchDecoder) batchMember(key string) error {
	switch key {
	case "inserts":
		return d.dec.Array(d.insert)
	case "deletes":
		return d.dec.Array(d.deleteID)
	case "transforms":
		return d.dec.Array(d.transform)
	}
	return unknownField(key)
}

// insert reads an element of "inserts".
func (d *batchDecoder) insert() error {
	*d.inserts = append(*d.inserts, Insert{})
	return d.dec.Object(d.insertMember)
}

func (d *batchDecoder) insertMember(key string) (err error) {
	ins := *d.inserts
	in := &ins[len(ins)-1]
	switch key {
	case "id":
		in.ID, err = d.dec.ReadString()
		return err
	case "doc":
		in.Doc, err = d.dec.ReadValue()
		return err
	}
	return unknownField(key)
}

// deleteID reads an element of "deletes".
func (d *batchDecoder) deleteID() error {
	id, err := d.dec.ReadString()
	d.b.Deletes = append(d.b.Deletes, id)
	return err
}

// transform reads an element of "transforms".
func (d *batchDecoder) transform() error {
	d.b.Transforms = append(d.b.Transforms, Transform{})
	return d.dec.Object(d.transformMember)
}

func (d *batchDecoder) transformMember(key string) (err error) {
	tr := &d.b.Transforms[len(d.b.Transforms)-1]
	switch key {
	case "id":
		tr.ID, err = d.dec.ReadString()
		return err
	case "upsert":
		tr.Upsert, err = d.dec.ReadBool()
		return err
	case "ops":
		return d.dec.Array(d.op)
	}
	return unknownField(key)
}

// op reads an element of a transform's "ops".
func (d *batchDecoder) op() error {
	tr := &d.b.Transforms[len(d.b.Transforms)-1]
	tr.Ops = append(tr.Ops, Op{})
	return d.dec.Object(d.opMember)
}

func (d *batchDecoder) opMember(key string) (err error) {
	tr := &d.b.Transforms[len(d.b.Transforms)-1]
	op := &tr.Ops[len(tr.Ops)-1]
	switch key {
	case "op":
		op.Op, err = d.dec.ReadString()
		return err
	case "path":
		op.Path, err = d.dec.ReadString()
		return err
	case "value":
		op.Value, err = d.dec.ReadValue()
		return err
	}
	return unknownField(key)
}
