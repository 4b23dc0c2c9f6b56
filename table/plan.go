package table

import (
	"context"
	"strconv"

	"github.com/idemdb/idem/store"
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

	base    store.Version // put, read: the version the session saw (0: absent)
	blind   bool          // put: held to no version
	deleted bool          // put: the session deletes it
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
// (store.GetAll) and during this request, so as fresh as Preflight's own
// read; Begin is conditioned on its version all the same.
func (t *Tables) PreflightWithMeta(tenant, table string, b *Batch, meta store.Item) (*Plan, error) {
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

// PreflightCached is Preflight with the table's metadata as this process
// last read it, reading nothing: ok=false when it holds no copy (the table
// was never read here, or was absent when last read). The copy may be
// stale — another node dropped the table, or dropped and created it again
// — and Begin, conditioned on the copy's version, then writes nothing
// (Shard.Refusal); a caller must plan again from a fresh read before it
// takes any refusal of such a plan for an answer (receipt.Execute does,
// docs/etcd.md).
func (t *Tables) PreflightCached(tenant, table string, b *Batch) (p *Plan, ok bool, err error) {
	c, ok := t.metas.Load(cacheKey(tenant, table))
	if !ok {
		return nil, false, nil
	}
	if err := b.Validate(); err != nil {
		return nil, true, err
	}
	return t.plan(c.(Meta), b), true, nil
}

// plan splits b by shard of table m. It is a counting sort: one pass
// finds each document's shard, the counts place every shard's documents in
// one array (in batch order within a shard), and the shards come out in
// shard order, each a window of one array of Shards — three allocations
// where a map, a sort and appends per shard made about twenty.
func (t *Tables) plan(m Meta, b *Batch) *Plan {
	p := &Plan{Table: m, Batch: b, Canonical: b.canon.Load().bytes}
	n := b.docCount()
	var counts [ShardsMax + 1]int32 // counts[k+1]: documents of shard k, then offsets
	var small [planInPlaceDocs]uint16
	shardOf := small[:0]
	if n > len(small) {
		shardOf = make([]uint16, 0, n)
	}
	for i := range n {
		k := ShardOf(b.docID(i), m.Shards)
		shardOf = append(shardOf, uint16(k))
		counts[k+1]++
	}
	distinct := 0
	for k := 1; k <= m.Shards; k++ {
		if counts[k] > 0 {
			distinct++
		}
		counts[k] += counts[k-1]
	}
	work := make([]docWork, n)
	next := counts // the next free slot of each shard's window
	for i := range n {
		k := shardOf[i]
		work[next[k]] = b.docWork(i)
		next[k]++
	}
	tableKey := metaKey(m.Tenant, m.Name) // one for every shard
	shards := make([]Shard, distinct)
	p.Shards = make([]*Shard, distinct)
	j := 0
	for k := range m.Shards {
		lo, hi := counts[k], counts[k+1]
		if lo == hi {
			continue
		}
		shards[j] = Shard{tables: t, meta: m, shard: k, tableKey: tableKey, docs: work[lo:hi:hi]}
		p.Shards[j] = &shards[j]
		j++
	}
	return p
}

// planInPlaceDocs is how many documents' shard numbers plan keeps on the
// stack; a larger batch allocates them.
const planInPlaceDocs = 64

// docID is the ID of the batch's i-th document: inserts, then deletes,
// then transforms.
func (b *Batch) docID(i int) string {
	if i < len(b.Inserts) {
		return b.Inserts[i].ID
	}
	if i -= len(b.Inserts); i < len(b.Deletes) {
		return b.Deletes[i]
	}
	return b.Transforms[i-len(b.Deletes)].ID
}

// docWork is what the batch does to its i-th document (docID's order).
func (b *Batch) docWork(i int) docWork {
	if i < len(b.Inserts) {
		return docWork{id: b.Inserts[i].ID, kind: kindInsert, doc: b.canonicalDoc(i)}
	}
	if i -= len(b.Inserts); i < len(b.Deletes) {
		return docWork{id: b.Deletes[i], kind: kindDelete}
	}
	tr := b.Transforms[i-len(b.Deletes)]
	return docWork{id: tr.ID, kind: kindTransform, ops: tr.Ops, upsert: tr.Upsert}
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
	return store.NSTable.Key(tableID, strconv.Itoa(shard), id)
}

func intentKey(tableID string, shard int, id string) []byte {
	return store.NSIntent.Key(tableID, strconv.Itoa(shard), id)
}

// appendDocKeys appends docKey and intentKey to buf and returns them, each
// capped, so that neither can grow into the other or into what follows.
func appendDocKeys(buf []byte, tableID, shard, id string) (doc, intent, rest []byte) {
	start := len(buf)
	buf = append(append(append(append(append(append(buf, store.NSTable...), tableID...), '/'), shard...), '/'), id...)
	n := len(buf)
	buf = append(append(append(append(append(append(buf, store.NSIntent...), tableID...), '/'), shard...), '/'), id...)
	return buf[start:n:n], buf[n:len(buf):len(buf)], buf[len(buf):]
}

// docKeysLen is how many bytes appendDocKeys appends.
func docKeysLen(tableID, shard, id string) int {
	suffix := len(tableID) + len(shard) + len(id) + 2
	return len(store.NSTable) + len(store.NSIntent) + 2*suffix
}
