package table

import (
	"context"
	"sort"
	"strconv"

	"github.com/idemdb/idem/engine"
)

// Plan is a validated batch bound to one table, split by shard. Preflight
// builds it without writing anything; the fast path or 2PC executes it.
type Plan struct {
	Table     Meta
	Batch     *Batch
	Canonical []byte   // canonical JSON of the batch (see Batch.Canonical)
	Shards    []*Shard // touched shards in shard order: the 2PC participants
}

// docKind is what a batch does to one document.
type docKind uint8

const (
	kindInsert docKind = iota + 1
	kindDelete
	kindTransform
	// An interactive session's commit (session.go) brings each document's
	// final state computed already, on the version it saw: put it (or
	// delete it), or only hold it to that version (read).
	kindPut
	kindRead
)

type docWork struct {
	id     string
	kind   docKind
	doc    []byte // insert: canonical document
	ops    []Op   // transform
	upsert bool

	base    engine.Version // put, read: the version the session saw (0: absent)
	blind   bool           // put: held to no version
	deleted bool           // put: the session deletes it
}

// Preflight validates batch against tenant's table: the table exists and every op is
// valid. Failures are *code.Error (table_not_found, invalid_request with the
// offending op) and are deterministic for a given batch and table state.
func (t *Tables) Preflight(ctx context.Context, tenant, table string, b *Batch) (*Plan, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	m, err := t.Meta(ctx, tenant, table)
	if err != nil {
		return nil, err
	}
	return t.plan(m, b), nil
}

// PreflightWithMeta is Preflight with the table's metadata item already
// read — at MetaKey, in the same round trip as something else
// (engine.GetAll) and during this request, so as fresh as Preflight's own
// read; Begin is conditioned on its version all the same.
func (t *Tables) PreflightWithMeta(tenant, table string, b *Batch, meta engine.Item) (*Plan, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	if !ValidTableName(table) {
		return nil, InvalidTableName(table)
	}
	m, err := t.metaOf(tenant, table, meta)
	if err != nil {
		return nil, err
	}
	return t.plan(m, b), nil
}

// plan splits b by shard of table m.
func (t *Tables) plan(m Meta, b *Batch) *Plan {
	p := &Plan{Table: m, Batch: b, Canonical: b.canon.Load().bytes}
	byShard := map[int]*Shard{}
	tableKey := metaKey(m.Tenant, m.Name) // one for every shard
	add := func(w docWork) {
		n := ShardOf(w.id, m.Shards)
		s := byShard[n]
		if s == nil {
			s = &Shard{tables: t, meta: m, shard: n, tableKey: tableKey}
			byShard[n] = s
		}
		s.docs = append(s.docs, w)
	}
	for i, in := range b.Inserts {
		add(docWork{id: in.ID, kind: kindInsert, doc: b.canonicalDoc(i)})
	}
	for _, id := range b.Deletes {
		add(docWork{id: id, kind: kindDelete})
	}
	for _, tr := range b.Transforms {
		add(docWork{id: tr.ID, kind: kindTransform, ops: tr.Ops, upsert: tr.Upsert})
	}
	for _, s := range byShard {
		p.Shards = append(p.Shards, s)
	}
	sort.Slice(p.Shards, func(i, j int) bool { return p.Shards[i].shard < p.Shards[j].shard })
	return p
}

// Result sums what the shards' prepares computed.
func (p *Plan) Result() Result {
	var r Result
	for _, s := range p.Shards {
		r = r.Add(s.result)
	}
	return r
}

// ShardOf maps a document ID to one of n shards (FNV-1a, 32 bits, over the
// ID's bytes in place: hash/fnv's would copy the string).
func ShardOf(id string, n int) int {
	const offset, prime = 2166136261, 16777619
	h := uint32(offset)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * prime
	}
	return int(h % uint32(n))
}

func docKey(tableID string, shard int, id string) []byte {
	return engine.NSTable.Key(tableID, strconv.Itoa(shard), id)
}

func intentKey(tableID string, shard int, id string) []byte {
	return engine.NSIntent.Key(tableID, strconv.Itoa(shard), id)
}

// docKeys is docKey and intentKey in one allocation (each capped, so that
// neither can grow into the other).
func docKeys(tableID string, shard int, id string) (doc, intent []byte) {
	sh := strconv.Itoa(shard)
	suffix := len(tableID) + len(sh) + len(id) + 2
	buf := make([]byte, 0, len(engine.NSTable)+len(engine.NSIntent)+2*suffix)
	buf = append(append(append(append(append(append(buf, engine.NSTable...), tableID...), '/'), sh...), '/'), id...)
	n := len(buf)
	buf = append(append(append(append(append(append(buf, engine.NSIntent...), tableID...), '/'), sh...), '/'), id...)
	return buf[:n:n], buf[n:len(buf):len(buf)]
}
