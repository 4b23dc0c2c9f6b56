package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/internal/canonjson"
	"github.com/idemdb/idem/store"
)

// Bounds of one interactive session's staging (docs/design.md §14). A session's
// commit is one retained-2PC transaction, like a keyed batch, so it is held
// to a keyed batch's size: as many documents, and no more bytes than a
// request body carries.
const (
	// SessionDocsMax bounds the documents a session reads or writes.
	SessionDocsMax = BatchDocsMax
	// SessionBytesMax bounds the bytes of the documents a session writes.
	SessionBytesMax = 512 << 10
	// SessionTablesMax bounds the tables one session touches.
	SessionTablesMax = 16
)

// Staging is what an interactive session has read and written, kept by the
// receipt layer in the session's record until it commits: every document
// it touched with the version of the committed document it saw, and the
// state it gives the documents it wrote. Its commit is conditioned on every
// one of those versions (optimistic concurrency): a document that changed
// since the session saw it aborts the commit with transaction_conflict.
//
// A Staging is changed only by Stage and Read, and only on a copy the
// caller then makes durable (Clone), so that a refused step leaves the
// session as it was.
type Staging struct {
	Tables []SessionTable `cbor:"1,keyasint"`
	Docs   []SessionDoc   `cbor:"2,keyasint,omitempty"` // sorted by (Table, ID)
	Result Result         `cbor:"3,keyasint"`           // what the staged batches did, summed
	Bytes  int            `cbor:"4,keyasint"`           // the written documents' bytes

	// changed names the documents a step read first or wrote since the
	// copy it works on was made (Clone): what the step must make durable.
	changed map[docRef]struct{}
}

type docRef struct{ table, id string }

// SessionTable is a table a session touched, by the ID it had then: a table
// dropped and created again since is another table, and the commit is
// refused table_not_found.
type SessionTable struct {
	Name string `cbor:"1,keyasint"`
	ID   string `cbor:"2,keyasint"`
}

// SessionDoc is one document as a session sees it.
type SessionDoc struct {
	Table string        `cbor:"1,keyasint"`
	ID    string        `cbor:"2,keyasint"`
	Base  store.Version `cbor:"3,keyasint,omitempty"` // the committed document's version seen; 0: absent
	// Written: the session gives it Doc, or Deleted; else it only read it.
	Written bool   `cbor:"4,keyasint,omitempty"`
	Deleted bool   `cbor:"5,keyasint,omitempty"`
	Doc     []byte `cbor:"6,keyasint,omitempty"`
	// Blind: written without being read (an insert), so the commit holds
	// it to no version.
	Blind bool `cbor:"7,keyasint,omitempty"`
	// base is the committed document itself, while a step works on it.
	base []byte
}

// Clone returns a copy that Stage and Read may change; Changed reports
// what they changed in it.
func (s *Staging) Clone() *Staging {
	c := &Staging{Result: s.Result, Bytes: s.Bytes}
	c.Tables = append([]SessionTable(nil), s.Tables...)
	c.Docs = append([]SessionDoc(nil), s.Docs...)
	return c
}

// Header is s without its documents: what a session's record keeps, the
// documents living in the steps that changed them.
func (s *Staging) Header() *Staging {
	return &Staging{Tables: append([]SessionTable(nil), s.Tables...), Result: s.Result, Bytes: s.Bytes}
}

// Changed returns the documents read first or written since Clone, in
// order: one step's change, which Merge folds back in.
func (s *Staging) Changed() []SessionDoc {
	if len(s.changed) == 0 {
		return nil
	}
	out := make([]SessionDoc, 0, len(s.changed))
	for _, d := range s.Docs {
		if _, ok := s.changed[docRef{d.Table, d.ID}]; ok {
			out = append(out, d)
		}
	}
	return out
}

// Merge folds one step's documents (Changed) into s: each replaces the
// document of its table and ID, or joins the others.
func (s *Staging) Merge(docs []SessionDoc) {
	for _, d := range docs {
		i, found := s.find(d.Table, d.ID)
		if found {
			s.Docs[i] = d
			continue
		}
		s.Docs = append(s.Docs, SessionDoc{})
		copy(s.Docs[i+1:], s.Docs[i:])
		s.Docs[i] = d
	}
}

// mark records that d changed in this copy.
func (s *Staging) mark(d *SessionDoc) {
	if s.changed == nil {
		s.changed = map[docRef]struct{}{}
	}
	s.changed[docRef{d.Table, d.ID}] = struct{}{}
}

// Writes is how many documents the session writes.
func (s *Staging) Writes() int {
	n := 0
	for _, d := range s.Docs {
		if d.Written {
			n++
		}
	}
	return n
}

func (s *Staging) find(tbl, id string) (int, bool) {
	i := sort.Search(len(s.Docs), func(i int) bool {
		d := s.Docs[i]
		return d.Table > tbl || d.Table == tbl && d.ID >= id
	})
	return i, i < len(s.Docs) && s.Docs[i].Table == tbl && s.Docs[i].ID == id
}

func (s *Staging) tableID(name string) (string, bool) {
	for _, t := range s.Tables {
		if t.Name == name {
			return t.ID, true
		}
	}
	return "", false
}

// useTable binds the session to m, the table named m.Name now; a session
// that saw another table of that name refuses it.
func (s *Staging) useTable(m Meta) *code.Error {
	if id, ok := s.tableID(m.Name); ok {
		if id != m.ID {
			return tableRecreated(m.Name)
		}
		return nil
	}
	if len(s.Tables) >= SessionTablesMax {
		return invalid("a session touches at most %d tables", SessionTablesMax)
	}
	s.Tables = append(s.Tables, SessionTable{Name: m.Name, ID: m.ID})
	return nil
}

func tableRecreated(name string) *code.Error {
	return code.Errorf(code.TableNotFound, "table %q was dropped since the session used it", name)
}

// view returns the session's document tbl/id, reading the committed one
// (and recording what it saw) the first time: ok=false when it does not
// exist for the session.
func (t *Tables) view(ctx context.Context, s *Staging, m Meta, id string) (*SessionDoc, bool, error) {
	i, found := s.find(m.Name, id)
	if !found {
		if len(s.Docs) >= SessionDocsMax {
			return nil, false, invalid("a session reads or writes at most %d documents", SessionDocsMax)
		}
		d := SessionDoc{Table: m.Name, ID: id}
		it, err := t.store.Get(ctx, docKey(m.ID, ShardOf(id, m.Shards), id))
		switch {
		case err == nil:
			d.Base, d.base = it.Version, it.Value
		case !errors.Is(err, store.ErrNotFound):
			return nil, false, err
		}
		s.Docs = append(s.Docs, SessionDoc{})
		copy(s.Docs[i+1:], s.Docs[i:])
		s.Docs[i] = d
		s.mark(&s.Docs[i])
	}
	d := &s.Docs[i]
	switch {
	case d.Written:
		return d, !d.Deleted, nil
	case d.Base == 0:
		return d, false, nil
	case d.base == nil:
		// Seen by an earlier step: read it again at the version seen. A
		// newer version is a conflict the commit will report; the session
		// goes on from what it saw.
		it, err := t.store.Get(ctx, docKey(m.ID, ShardOf(id, m.Shards), id))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, false, err
		}
		if err != nil || it.Version != d.Base {
			return nil, false, code.Errorf(code.TransactionConflict,
				"document %q changed since the session read it", id)
		}
		d.base = it.Value
	}
	return d, true, nil
}

// current is the document's content as the session sees it.
func (d *SessionDoc) current() []byte {
	if d.Written {
		return d.Doc
	}
	return d.base
}

// SessionRead reads document id of tenant's table tbl as session s sees it:
// its own writes over the committed state. The first read of a document
// records the version it saw.
func (t *Tables) SessionRead(ctx context.Context, tenant string, s *Staging, tbl, id string) (json.RawMessage, error) {
	m, err := t.Meta(ctx, tenant, tbl)
	if err != nil {
		return nil, err
	}
	if !validDocID(id) {
		return nil, invalid("invalid document id %q", id)
	}
	if cerr := s.useTable(m); cerr != nil {
		return nil, cerr
	}
	d, exists, err := t.view(ctx, s, m, id)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, code.Errorf(code.DocumentNotFound, "document %q does not exist in table %q", id, tbl)
	}
	return d.current(), nil
}

// SessionStage applies batch b on tenant's table tbl to session s: the
// batch is validated and computed now, on the session's view, so that a
// refusal (an invalid op, a transform of a missing document) is answered
// at once and changes nothing. Failures are *code.Error where typed.
func (t *Tables) SessionStage(ctx context.Context, tenant string, s *Staging, tbl string, b *Batch) (Result, error) {
	if err := b.Validate(); err != nil {
		return Result{}, err
	}
	m, err := t.Meta(ctx, tenant, tbl)
	if err != nil {
		return Result{}, err
	}
	if cerr := s.useTable(m); cerr != nil {
		return Result{}, cerr
	}
	var res Result
	for i, in := range b.Inserts {
		if err := s.stageInsert(m, in.ID, b.canonicalDoc(i)); err != nil {
			return Result{}, err
		}
		res.Inserted++
	}
	for _, id := range b.Deletes {
		d, exists, err := t.view(ctx, s, m, id)
		if err != nil {
			return Result{}, err
		}
		if exists {
			res.Deleted++
		}
		s.write(d, nil, true)
	}
	for _, tr := range b.Transforms {
		d, exists, err := t.view(ctx, s, m, tr.ID)
		if err != nil {
			return Result{}, err
		}
		doc := map[string]any{}
		switch {
		case exists:
			if doc, err = decodeObject(d.current()); err != nil {
				return Result{}, fmt.Errorf("table: stored document %q is not an object: %w", tr.ID, err)
			}
		case !tr.Upsert:
			return Result{}, code.Errorf(code.DocumentNotFound, "transform of %q: document does not exist (set upsert to create it)", tr.ID)
		}
		if cerr := applyTransform(doc, tr.ID, tr.Ops); cerr != nil {
			return Result{}, cerr
		}
		enc, err := canonjson.Marshal(doc)
		if err != nil {
			return Result{}, err
		}
		if len(enc) > docBytesMax {
			return Result{}, invalid("transform of %q: result of %d bytes exceeds %d", tr.ID, len(enc), docBytesMax)
		}
		s.write(d, enc, false)
		res.Transformed++
	}
	if s.Bytes > SessionBytesMax {
		return Result{}, code.Errorf(code.PayloadTooLarge, "the session's documents would take %d bytes, above %d", s.Bytes, SessionBytesMax)
	}
	s.Result = s.Result.Add(res)
	return res, nil
}

// stageInsert gives document id the content doc in s without reading it:
// an insert replaces whatever is there, so its commit is conditioned on no
// version (Blind) unless the session saw the document before.
func (s *Staging) stageInsert(m Meta, id string, doc []byte) error {
	i, found := s.find(m.Name, id)
	if !found {
		if len(s.Docs) >= SessionDocsMax {
			return invalid("a session reads or writes at most %d documents", SessionDocsMax)
		}
		s.Docs = append(s.Docs, SessionDoc{})
		copy(s.Docs[i+1:], s.Docs[i:])
		s.Docs[i] = SessionDoc{Table: m.Name, ID: id, Blind: true}
	}
	s.write(&s.Docs[i], doc, false)
	return nil
}

// write gives d the content doc, or deletes it, keeping Bytes.
func (s *Staging) write(d *SessionDoc, doc []byte, deleted bool) {
	if d.Written {
		s.Bytes -= len(d.Doc)
	}
	d.Written, d.Deleted, d.Doc = true, deleted, doc
	s.Bytes += len(doc)
	s.mark(d)
}

// SessionPlan plans the commit of session s of tenant: one participant per
// shard it touched, each staging exactly the session's documents under the
// conditions that none changed since the session saw it. A table dropped
// since (or created again) is table_not_found.
func (t *Tables) SessionPlan(ctx context.Context, tenant string, s *Staging) (*Plan, error) {
	metas := make(map[string]Meta, len(s.Tables))
	for _, st := range s.Tables {
		m, err := t.Meta(ctx, tenant, st.Name)
		if err != nil {
			return nil, err
		}
		if m.ID != st.ID {
			return nil, tableRecreated(st.Name)
		}
		metas[st.Name] = m
	}
	p := &Plan{}
	type shardKey struct {
		table string
		n     int
	}
	byShard := map[shardKey]*Shard{}
	for _, d := range s.Docs {
		m, ok := metas[d.Table]
		if !ok {
			return nil, fmt.Errorf("table: session document %s/%s names a table the session did not record", d.Table, d.ID)
		}
		k := shardKey{d.Table, ShardOf(d.ID, m.Shards)}
		sh := byShard[k]
		if sh == nil {
			sh = &Shard{tables: t, meta: m, shard: k.n, fixed: true}
			byShard[k] = sh
			p.Shards = append(p.Shards, sh)
		}
		w := docWork{id: d.ID, kind: kindRead, base: d.Base, blind: d.Blind}
		if d.Written {
			w.kind, w.doc, w.deleted = kindPut, d.Doc, d.Deleted
		}
		sh.docs = append(sh.docs, w)
	}
	// Docs are sorted by table, then ID: order shards by table, then shard.
	sort.SliceStable(p.Shards, func(i, j int) bool {
		a, b := p.Shards[i], p.Shards[j]
		return a.meta.Name < b.meta.Name || a.meta.Name == b.meta.Name && a.shard < b.shard
	})
	return p, nil
}
