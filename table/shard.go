package table

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/internal/canonjson"
	"github.com/idemdb/idem/store"
)

// Shard is the work of one batch on one shard of a table. It is the 2PC
// participant: Prepare stages intents, Resolve applies or discards them.
// Shards never write on their own; they return batches that the caller makes
// durable, so that a coordinator can put every local participant's step in
// one atomic Apply.
type Shard struct {
	tables *Tables
	meta   Meta
	shard  int
	docs   []docWork
	result Result // what Prepare computed
	// fixed: the documents' states were computed by a session on the
	// versions it saw (kindPut, kindRead), so a changed document is a
	// final no, not worth a fresh Prepare.
	fixed bool
	// latest: stage reads documents' newest sequenced versions, durable
	// or not (StageDirect says when that is safe).
	latest bool

	// What Prepare staged, and the version Begin wrote it at (0 until the
	// coordinator reports it): Resolve then needs no reads.
	staged     []staged
	stagedTxn  string
	preparedAt store.Version
	// tableKey is the table's metadata key, shared by the shards of one
	// plan (nil: computed when first needed).
	tableKey []byte
	// keyBuf is where docKeys carves the documents' keys from.
	keyBuf []byte
}

// docKeys returns document id's key and intent key. They are carved from
// one buffer, allocated for every document of the shard at the first call
// and at the first after it ran out (a second staging): never reused, so a
// key handed out stays as it was.
func (s *Shard) docKeys(id string) (doc, intent []byte) {
	sh := strconv.Itoa(s.shard)
	if need := docKeysLen(s.meta.ID, sh, id); cap(s.keyBuf)-len(s.keyBuf) < need {
		total := 0
		for _, w := range s.docs {
			total += docKeysLen(s.meta.ID, sh, w.id)
		}
		s.keyBuf = make([]byte, 0, max(total, need))
	}
	doc, intent, s.keyBuf = appendDocKeys(s.keyBuf, s.meta.ID, sh, id)
	return doc, intent
}

// DocKeys appends the keys of the shard's documents to dst, as strings:
// what a keyed batch latches in its process so that batches on one
// document wait for each other instead of failing each other's
// conditions (receipt/doclatch.go).
func (s *Shard) DocKeys(dst []string) []string {
	for _, w := range s.docs {
		dst = append(dst, string(docKey(s.meta.ID, s.shard, w.id)))
	}
	return dst
}

// metaKey is the key of the shard's table metadata.
func (s *Shard) metaKey() []byte {
	if s.tableKey == nil {
		s.tableKey = metaKey(s.meta.Tenant, s.meta.Name)
	}
	return s.tableKey
}

// intent is a document's staged new state under a transaction.
type intent struct {
	Txn     string `cbor:"1,keyasint"`
	Deleted bool   `cbor:"2,keyasint,omitempty"`
	Doc     []byte `cbor:"3,keyasint,omitempty"`
	// Read: the transaction only read the document (a session's read
	// set); the intent holds it unchanged until the decision, and
	// resolving it, either way, leaves the document as it is.
	Read bool `cbor:"4,keyasint,omitempty"`
}

// shardRef is what a coordinator record keeps to rebuild a participant for
// resolution after a restart.
type shardRef struct {
	TableID string   `cbor:"1,keyasint"`
	Shard   int      `cbor:"2,keyasint"`
	Docs    []string `cbor:"3,keyasint"`
	Table   string   `cbor:"4,keyasint,omitempty"`
	Tenant  string   `cbor:"5,keyasint,omitempty"`
}

// ID names the participant: <table id>/<shard>.
func (s *Shard) ID() string { return s.meta.ID + "/" + strconv.Itoa(s.shard) }

// Ref encodes what Resolve needs, for the coordinator record.
func (s *Shard) Ref() []byte {
	r := shardRef{TableID: s.meta.ID, Shard: s.shard, Table: s.meta.Name, Tenant: s.meta.Tenant, Docs: make([]string, 0, len(s.docs))}
	for _, d := range s.docs {
		r.Docs = append(r.Docs, d.id)
	}
	b, _ := cbor.Marshal(r)
	return b
}

// Participant rebuilds a resolve-only participant from a Ref.
func (t *Tables) Participant(ref []byte) (*Shard, error) {
	var r shardRef
	err := cbor.Unmarshal(ref, &r)
	if err == nil && (r.TableID == "" || r.Shard < 0 || r.Shard >= ShardsMax) {
		err = fmt.Errorf("table %q, shard %d (0..%d)", r.TableID, r.Shard, ShardsMax-1)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: table: participant ref does not decode: %v", store.ErrCorruption, err)
	}
	s := &Shard{tables: t, meta: Meta{ID: r.TableID, Name: r.Table, Tenant: r.Tenant}, shard: r.Shard}
	for _, id := range r.Docs {
		s.docs = append(s.docs, docWork{id: id})
	}
	return s, nil
}

// staged is one document's computed new state.
type staged struct {
	docKey, intentKey []byte
	base              store.Version // version of the document read; 0 if absent
	condOnBase        bool          // the result depends on the document read
	deleted           bool
	read              bool // held unchanged, not written (intent.Read)
	doc               []byte
}

// stage reads one document and computes its new state. A transform of a
// missing document without upsert is document_not_found and a transform
// type error invalid_request: *code.Error, a participant's "no" vote. An
// open intent on the document is not looked for here: the write that stages
// the result requires the intent to be absent, atomically, and a failure
// there is the transaction_conflict vote (Refusal).
func (s *Shard) stage(ctx context.Context, w docWork, res *Result) (staged, error) {
	st := staged{}
	st.docKey, st.intentKey = s.docKeys(w.id)
	switch w.kind {
	case kindPut:
		st.base, st.condOnBase, st.deleted, st.doc = w.base, !w.blind, w.deleted, w.doc
		return st, nil
	case kindRead:
		st.base, st.condOnBase, st.read = w.base, true, true
		return st, nil
	}
	get := s.tables.store.Get
	if lr := s.tables.store.Capabilities().Latest; lr != nil && s.latest {
		get = lr.GetLatest
	}
	var cur []byte
	if w.kind != kindInsert { // an insert replaces whatever is there: no read
		if it, err := get(ctx, st.docKey); err == nil {
			st.base, cur = it.Version, it.Value
		} else if !errors.Is(err, store.ErrNotFound) {
			return st, err
		}
	}
	switch w.kind {
	case kindInsert:
		st.doc = w.doc
		res.Inserted++
	case kindDelete:
		st.deleted, st.condOnBase = true, true
		if st.base != 0 {
			res.Deleted++
		}
	case kindTransform:
		st.condOnBase = true
		var doc map[string]any
		switch {
		case st.base != 0:
			var err error
			if doc, err = decodeObject(cur); err != nil {
				return st, fmt.Errorf("table: stored document %q is not an object: %w", w.id, err)
			}
		case w.upsert:
			doc = map[string]any{}
		default:
			return st, code.Errorf(code.DocumentNotFound, "transform of %q: document does not exist (set upsert to create it)", w.id)
		}
		if cerr := applyTransform(doc, w.id, w.ops); cerr != nil {
			return st, cerr
		}
		enc, err := canonjson.Marshal(doc)
		if err != nil {
			return st, err
		}
		if len(enc) > docBytesMax {
			return st, invalid("transform of %q: result of %d bytes exceeds %d", w.id, len(enc), docBytesMax)
		}
		st.doc = enc
		res.Transformed++
	}
	return st, nil
}

// Prepare stages this shard's documents as intents of txnID and returns the
// writes (with their conditions) that make the vote durable. A *code.Error is
// a "no" vote; any other error is an error.
func (s *Shard) Prepare(ctx context.Context, txnID string) (*store.Batch, error) {
	// Per document an intent put, its absence and at most the base's
	// version; sized once, not grown document by document.
	if err := s.stageAll(ctx); err != nil {
		return nil, err
	}
	s.stagedTxn = txnID
	b := new(store.Batch).Grow(1+2*len(s.docs), len(s.docs)).AtVersion(s.metaKey(), s.meta.Version)
	// The intents' values in one buffer, sized first so that no value
	// moves once taken (each is capped).
	size := 0
	for _, st := range s.staged {
		size += intentBytesMax(len(txnID), len(st.doc))
	}
	vals := make([]byte, 0, size)
	for _, st := range s.staged {
		b.Absent(st.intentKey)
		if st.condOnBase {
			b.AtVersion(st.docKey, st.base)
		}
		start := len(vals)
		vals = appendIntent(vals, intent{Txn: txnID, Deleted: st.deleted, Doc: st.doc, Read: st.read})
		b.Put(st.intentKey, vals[start:len(vals):len(vals)])
	}
	return b, nil
}

// stageAll stages every document of the shard afresh (stage), forgetting
// what an earlier Prepare staged.
func (s *Shard) stageAll(ctx context.Context) error {
	s.result = Result{}
	s.staged, s.stagedTxn, s.preparedAt = slices.Grow(s.staged[:0], len(s.docs)), "", 0
	for _, w := range s.docs {
		st, err := s.stage(ctx, w, &s.result)
		if err != nil {
			return err
		}
		s.staged = append(s.staged, st)
	}
	return nil
}

// Resolve returns the writes that apply (commit) or discard (abort) the
// intents txnID holds on this shard, conditioned on those intents being
// unchanged. Intents already resolved or never written are skipped, so
// Resolve is idempotent; an empty batch means nothing is left to do.
func (s *Shard) Resolve(ctx context.Context, txnID string, commit bool) (*store.Batch, error) {
	if s.preparedAt != 0 && s.stagedTxn == txnID {
		// The intents are exactly what this Shard staged, at the version
		// Begin wrote them; the conditions still guard against any change.
		return s.stagedResolution(commit, s.preparedAt), nil
	}
	b := new(store.Batch)
	for _, w := range s.docs {
		ik := intentKey(s.meta.ID, s.shard, w.id)
		it, err := s.tables.store.Get(ctx, ik)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var in intent
		if err := cbor.Unmarshal(it.Value, &in); err != nil {
			return nil, store.RecordError(ik, "table: intent", err)
		}
		if in.Txn != txnID {
			continue
		}
		b.AtVersion(ik, it.Version).Delete(ik)
		if commit && !in.Read {
			dk := docKey(s.meta.ID, s.shard, w.id)
			if in.Deleted {
				b.Delete(dk)
			} else {
				b.Put(dk, in.Doc)
			}
		}
	}
	return b, nil
}

// ResolveStaged returns the resolution of what the last Prepare staged for
// txnID, before it is durable, for a decision chained right behind it
// (twopc.StagedResolver): nothing can come between the two, so it carries
// no conditions on the intents. ok is false if the last Prepare was not
// txnID's.
func (s *Shard) ResolveStaged(txnID string, commit bool) (*store.Batch, bool) {
	if s.stagedTxn != txnID {
		return nil, false
	}
	return s.stagedResolution(commit, 0), true
}

// stagedResolution deletes the staged intents and, on commit, installs
// their documents; at != 0 requires each intent to be unchanged since
// version at.
func (s *Shard) stagedResolution(commit bool, at store.Version) *store.Batch {
	b := &store.Batch{Ops: make([]store.Op, 0, 2*len(s.staged))}
	for _, st := range s.staged {
		if at != 0 {
			b.AtVersion(st.intentKey, at)
		}
		b.Delete(st.intentKey)
		if commit && !st.read {
			if st.deleted {
				b.Delete(st.docKey)
			} else {
				b.Put(st.docKey, st.doc)
			}
		}
	}
	return b
}

// Prepared records that Begin made this shard's staged intents durable at
// version v (twopc calls it), so that Resolve can skip reading them back.
func (s *Shard) Prepared(txnID string, v store.Version) {
	if txnID == s.stagedTxn {
		s.preparedAt = v
	}
}

// Refusal explains a failed condition on one of this shard's keys: the table
// was dropped (table_not_found), a document has an open intent
// (transaction_conflict), or a document changed since it was read
// (transaction_conflict, worth a fresh Prepare).
func (s *Shard) Refusal(key []byte) (*code.Error, bool, bool) {
	sh := strconv.Itoa(s.shard)
	switch {
	case s.meta.Name != "" && bytes.Equal(key, s.metaKey()):
		return tableNotFound(s.meta.Name), false, true
	case bytes.HasPrefix(key, store.NSIntent.Prefix(s.meta.ID, sh)):
		return code.Errorf(code.TransactionConflict, "document %q is being written by another transaction",
			key[len(store.NSIntent.Prefix(s.meta.ID, sh)):]), false, true
	case s.fixed && bytes.HasPrefix(key, store.NSTable.Prefix(s.meta.ID, sh)):
		return code.Errorf(code.TransactionConflict, "document %q changed since the session read it",
			key[len(store.NSTable.Prefix(s.meta.ID, sh)):]), false, true
	case bytes.HasPrefix(key, store.NSTable.Prefix(s.meta.ID, sh)):
		return code.Errorf(code.TransactionConflict, "document %q changed while the batch was prepared",
			key[len(store.NSTable.Prefix(s.meta.ID, sh)):]), true, true
	}
	return nil, false, false
}

// Contended says whether a failed condition on key is contention rather
// than a real conflict (twopc.Contender): an open intent on one of this
// shard's documents is another transaction's write in flight, and a
// document changed under a batch that computes its states afresh at each
// Prepare is met again at the newer version. A document a session read
// (fixed) that changed is a real conflict; so is a dropped table.
func (s *Shard) Contended(key []byte) bool {
	sh := strconv.Itoa(s.shard)
	switch {
	case s.meta.Name != "" && bytes.Equal(key, s.metaKey()):
		return false
	case bytes.HasPrefix(key, store.NSIntent.Prefix(s.meta.ID, sh)):
		return true
	}
	return !s.fixed && bytes.HasPrefix(key, store.NSTable.Prefix(s.meta.ID, sh))
}

// HolderOf names the transaction whose intent is at key, if key is one of
// this shard's intents and one is there (twopc.IntentHolder): a Begin that
// met it resolves it when that transaction is decided (twopc/debt.go).
func (s *Shard) HolderOf(ctx context.Context, key []byte) (string, bool, error) {
	if !bytes.HasPrefix(key, store.NSIntent.Prefix(s.meta.ID, strconv.Itoa(s.shard))) {
		return "", false, nil
	}
	it, err := s.tables.store.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	var in intent
	if err := cbor.Unmarshal(it.Value, &in); err != nil {
		return "", false, store.RecordError(key, "table: intent", err)
	}
	return in.Txn, true, nil
}

// IntentKeys appends the intent keys of this shard's documents
// (twopc.IntentHolder).
func (s *Shard) IntentKeys(dst [][]byte) [][]byte {
	for _, w := range s.docs {
		dst = append(dst, intentKey(s.meta.ID, s.shard, w.id))
	}
	return dst
}
