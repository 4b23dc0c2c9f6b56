package table

import (
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/canonjson"
)

// build writes the canonical form of a batch validate accepted:
// {"inserts":[{"id":…,"doc":…}],"deletes":[…],"transforms":[{"id":…,
// "ops":[{"op":…,"path":…,"value":…}],"upsert":true}]}, members in that
// (sorted) order, empty lists and a false upsert left out. These bytes are
// what fingerprints are computed from: this layout must never change.
func (b *Batch) build(f *forms) *canonBatch {
	c := &canonBatch{}
	// One buffer holds the canonical batch; documents alias into it. Each
	// entry is digested as it is written (digest.go).
	d := b.newEntryDigests()
	out := make([]byte, 0, 64+b.rawSize())
	out = append(out, '{')
	if len(b.Inserts) > 0 {
		out = b.appendInserts(out, f, c, &d)
	}
	if len(b.Deletes) > 0 {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = b.appendDeletes(out, &d)
	}
	if len(b.Transforms) > 0 {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = b.appendTransforms(out, f, &d)
	}
	c.bytes = append(out, '}')
	c.digests = d.out
	return c
}

// appendInserts also records where each document is in out (c.docs), for
// storage to reuse.
func (b *Batch) appendInserts(out []byte, f *forms, c *canonBatch, d *entryDigests) []byte {
	out = append(out, `"inserts":[`...)
	c.docs = make([][]byte, len(b.Inserts))
	for i, in := range b.Inserts {
		if i > 0 {
			out = append(out, ',')
		}
		entry := len(out)
		out = append(out, `{"id":`...)
		out = canonjson.AppendString(out, []byte(in.ID))
		out = append(out, `,"doc":`...)
		start := len(out)
		doc, _ := f.doc(i) // validated
		out = append(out, doc...)
		c.docs[i] = out[start:len(out):len(out)]
		out = append(out, '}')
		d.add(ListInserts, in.ID, out[entry:])
	}
	return append(out, ']')
}

func (b *Batch) appendDeletes(out []byte, d *entryDigests) []byte {
	out = append(out, `"deletes":[`...)
	for i, id := range b.Deletes {
		if i > 0 {
			out = append(out, ',')
		}
		entry := len(out)
		out = canonjson.AppendString(out, []byte(id))
		d.add(ListDeletes, id, out[entry:])
	}
	return append(out, ']')
}

func (b *Batch) appendTransforms(out []byte, f *forms, d *entryDigests) []byte {
	out = append(out, `"transforms":[`...)
	k := 0 // the op's index in the batch, for forms
	for i, tr := range b.Transforms {
		if i > 0 {
			out = append(out, ',')
		}
		entry := len(out)
		out = append(out, `{"id":`...)
		out = canonjson.AppendString(out, []byte(tr.ID))
		out = append(out, `,"ops":[`...)
		for j, op := range tr.Ops {
			if j > 0 {
				out = append(out, ',')
			}
			out = op.appendCanonical(out, f, k)
			k++
		}
		out = append(out, ']')
		if tr.Upsert && !fault.Planted(fault.BugCanonDropsUpsert) { // planted only under -tags idem_selftest
			out = append(out, `,"upsert":true`...)
		}
		out = append(out, '}')
		d.add(ListTransforms, tr.ID, out[entry:])
	}
	return append(out, ']')
}

// appendCanonical appends a validated op as {"op":…,"path":…[,"value":…]};
// k is its index in the batch (for forms).
func (op Op) appendCanonical(out []byte, f *forms, k int) []byte {
	out = append(out, `{"op":`...)
	out = canonjson.AppendString(out, []byte(op.Op))
	out = append(out, `,"path":`...)
	out = canonjson.AppendString(out, []byte(op.Path))
	if op.Op != OpUnset { // every other op has a value (validate)
		v, _ := f.value(k, op.Value)
		out = append(out, `,"value":`...)
		out = append(out, v...)
	}
	return append(out, '}')
}

// rawSize estimates the canonical batch's length from its parts, so that
// build's buffer is allocated once.
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
			n += len(op.Value) + len(op.Op) + len(op.Path) + 30
		}
	}
	return n
}
