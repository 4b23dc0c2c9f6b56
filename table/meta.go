package table

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/engine"
)

// Meta describes a table. Documents are keyed by ID, not name, so a table
// that is dropped and created again starts empty even if a purge of the old
// one has not finished.
type Meta struct {
	Name    string         `cbor:"1,keyasint" json:"name"`
	ID      string         `cbor:"2,keyasint" json:"-"`
	Shards  int            `cbor:"3,keyasint" json:"shards"`
	Created int64          `cbor:"4,keyasint" json:"created_unix_ms"`
	Version engine.Version `cbor:"-" json:"-"`
}

// TablesListMax bounds how many tables List returns.
const TablesListMax = 1000

// purgeBatchMax bounds the deletes of one purge Apply.
const purgeBatchMax = 256

// DecisionReader tells document reads whether a transaction committed, so
// that a read which finds an intent can resolve it on the fly (DESIGN §12:
// reads never see uncommitted intents and always see a committed batch once
// its answer was sent). decided=false means no decision exists yet.
type DecisionReader func(ctx context.Context, txnID string) (committed, decided bool, err error)

// Tables manages tables and documents in a Store.
type Tables struct {
	store     engine.Store
	now       func() time.Time
	decisions DecisionReader
	metas     sync.Map // name -> Meta as decoded at its Version; one entry per existing table
}

// New returns a table manager. decisions may be nil until SetDecisionReader
// is called; reads then treat every open intent as uncommitted.
func New(store engine.Store, now func() time.Time) *Tables {
	if now == nil {
		now = time.Now
	}
	return &Tables{store: store, now: now}
}

// SetDecisionReader installs the 2PC decision lookup used by resolve-on-read.
func (t *Tables) SetDecisionReader(d DecisionReader) { t.decisions = d }

func metaKey(name string) []byte      { return engine.NSMeta.Key("table", name) }
func droppedKey(id string) []byte     { return engine.NSMeta.Key("dropped", id) }
func docPrefix(tableID string) []byte { return engine.NSTable.Prefix(tableID) }

func tableNotFound(name string) *code.Error {
	return code.Errorf(code.TableNotFound, "table %q does not exist", name)
}

// Meta returns a table's metadata, or a *code.Error table_not_found.
func (t *Tables) Meta(ctx context.Context, name string) (Meta, error) {
	if !ValidTableName(name) {
		return Meta{}, invalid("invalid table name %q (1..%d of A-Z a-z 0-9 _ -)", name, TableNameBytesMax)
	}
	it, err := t.store.Get(ctx, metaKey(name))
	if errors.Is(err, engine.ErrNotFound) {
		t.metas.Delete(name)
		return Meta{}, tableNotFound(name)
	}
	if err != nil {
		return Meta{}, err
	}
	// Metadata changes only when a table is created or dropped, and the
	// store's version says when: a decoded copy is reused until it moves.
	if c, ok := t.metas.Load(name); ok && c.(Meta).Version == it.Version {
		return c.(Meta), nil
	}
	var m Meta
	if err := cbor.Unmarshal(it.Value, &m); err != nil {
		return Meta{}, fmt.Errorf("table: decode meta of %q: %w", name, err)
	}
	m.Version = it.Version
	t.metas.Store(name, m)
	return m, nil
}

// Create creates a table with the given number of shards (0 = DefaultShards).
// Creating an existing table returns it with created=false.
func (t *Tables) Create(ctx context.Context, name string, shards int) (m Meta, created bool, err error) {
	if !ValidTableName(name) {
		return Meta{}, false, invalid("invalid table name %q (1..%d of A-Z a-z 0-9 _ -)", name, TableNameBytesMax)
	}
	if shards == 0 {
		shards = DefaultShards
	}
	if shards < 1 || shards > ShardsMax {
		return Meta{}, false, invalid("shards must be 1..%d", ShardsMax)
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Meta{}, false, err
	}
	m = Meta{Name: name, ID: hex.EncodeToString(id[:]), Shards: shards, Created: t.now().UnixMilli()}
	val, err := cbor.Marshal(m)
	if err != nil {
		return Meta{}, false, err
	}
	v, err := t.store.Apply(ctx, new(engine.Batch).Absent(metaKey(name)).Put(metaKey(name), val))
	if errors.Is(err, engine.ErrConditionFailed) {
		existing, err := t.Meta(ctx, name)
		return existing, false, err
	}
	if err != nil {
		return Meta{}, false, err
	}
	m.Version = v
	return m, true, nil
}

// Drop removes a table. Its documents are purged in bounded batches; if the
// process stops part-way, Purge finishes the job later.
func (t *Tables) Drop(ctx context.Context, name string) error {
	m, err := t.Meta(ctx, name)
	if err != nil {
		return err
	}
	_, err = t.store.Apply(ctx, new(engine.Batch).
		AtVersion(metaKey(name), m.Version).
		Delete(metaKey(name)).
		Put(droppedKey(m.ID), []byte(name)))
	if errors.Is(err, engine.ErrConditionFailed) {
		return tableNotFound(name) // dropped (or recreated) concurrently
	}
	if err != nil {
		return err
	}
	return t.purge(ctx, m.ID)
}

// Purge finishes the document purges of dropped tables.
func (t *Tables) Purge(ctx context.Context) error {
	prefix := engine.NSMeta.Prefix("dropped")
	items, err := t.store.Scan(ctx, prefix, engine.PrefixEnd(prefix), TablesListMax)
	if err != nil {
		return err
	}
	for _, it := range items {
		if err := t.purge(ctx, string(it.Key[len(prefix):])); err != nil {
			return err
		}
	}
	return nil
}

func (t *Tables) purge(ctx context.Context, id string) error {
	// Intents first: resolving a committed intent writes its document (on
	// condition that the intent is unchanged), so once the intents are gone
	// nothing can write documents of this table any more, and the document
	// purge that follows leaves none behind.
	for _, prefix := range [][]byte{engine.NSIntent.Prefix(id), docPrefix(id)} {
		for {
			items, err := t.store.Scan(ctx, prefix, engine.PrefixEnd(prefix), purgeBatchMax)
			if err != nil {
				return err
			}
			if len(items) == 0 {
				break
			}
			b := new(engine.Batch)
			for _, it := range items {
				b.Delete(it.Key)
			}
			if _, err := t.store.Apply(ctx, b); err != nil {
				return err
			}
		}
	}
	_, err := t.store.Apply(ctx, new(engine.Batch).Delete(droppedKey(id)))
	return err
}

// List returns up to TablesListMax tables in name order.
func (t *Tables) List(ctx context.Context) ([]Meta, error) {
	prefix := engine.NSMeta.Prefix("table")
	items, err := t.store.Scan(ctx, prefix, engine.PrefixEnd(prefix), TablesListMax)
	if err != nil {
		return nil, err
	}
	out := make([]Meta, 0, len(items))
	for _, it := range items {
		var m Meta
		if err := cbor.Unmarshal(it.Value, &m); err != nil {
			return nil, fmt.Errorf("table: decode meta %q: %w", it.Key, err)
		}
		m.Version = it.Version
		out = append(out, m)
	}
	return out, nil
}
