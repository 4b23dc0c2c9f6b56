package table

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/store"
)

// Meta describes a table. Documents are keyed by ID, not name, so a table
// that is dropped and created again starts empty even if a purge of the old
// one has not finished.
//
// A table belongs to a tenant — the principal that created it (docs/design.md §8: a
// principal is a tenant) — and its name is unique within that tenant only:
// another tenant's table of the same name is another table, and to every
// other tenant a table does not exist.
type Meta struct {
	Name    string        `cbor:"1,keyasint" json:"name"`
	ID      string        `cbor:"2,keyasint" json:"-"`
	Shards  int           `cbor:"3,keyasint" json:"shards"`
	Created int64         `cbor:"4,keyasint" json:"created_unix_ms"`
	Tenant  string        `cbor:"5,keyasint,omitempty" json:"-"`
	Version store.Version `cbor:"-" json:"-"`
}

// TablesListMax bounds how many tables one List page returns.
const TablesListMax = 1000

// purgeBatchMax bounds the deletes of one purge Apply.
const purgeBatchMax = 256

// DecisionReader tells document reads whether a transaction committed, so
// that a read which finds an intent can resolve it on the fly (docs/design.md §12:
// reads never see uncommitted intents and always see a committed batch once
// its answer was sent). decided=false means no decision exists yet.
type DecisionReader func(ctx context.Context, txnID string) (committed, decided bool, err error)

// Tables manages tables and documents in a Store.
type Tables struct {
	store     store.Store
	now       func() time.Time
	decisions DecisionReader
	metas     sync.Map // cacheKey(tenant, name) -> Meta as decoded at its Version; one entry per existing table
}

// New returns a table manager. decisions may be nil until SetDecisionReader
// is called; reads then treat every open intent as uncommitted.
func New(st store.Store, now func() time.Time) *Tables {
	if now == nil {
		now = time.Now
	}
	return &Tables{store: st, now: now}
}

// SetDecisionReader installs the 2PC decision lookup used by resolve-on-read.
func (t *Tables) SetDecisionReader(d DecisionReader) { t.decisions = d }

// metaKey is where a tenant's table lives: meta/v1/tenant/<hex tenant>/<name>.
// The tenant is hex-encoded so that no principal's name, whatever its
// bytes, can reach into another's key range.
func metaKey(tenant, name string) []byte {
	return store.NSMeta.Key("tenant", hex.EncodeToString([]byte(tenant)), name)
}

func tenantPrefix(tenant string) []byte {
	return store.NSMeta.Prefix("tenant", hex.EncodeToString([]byte(tenant)))
}

func droppedKey(id string) []byte     { return store.NSMeta.Key("dropped", id) }
func docPrefix(tableID string) []byte { return store.NSTable.Prefix(tableID) }

func cacheKey(tenant, name string) string { return tenant + "\x00" + name }

func tableNotFound(name string) *code.Error {
	return code.Errorf(code.TableNotFound, "table %q does not exist", name)
}

// InvalidTableName is the invalid_request of a table name that breaks the
// rule: every route that checks a name answers with it, stating the rule.
func InvalidTableName(name string) *code.Error {
	return invalid("invalid table name %q (1..%d of A-Z a-z 0-9 _ -)", name, TableNameBytesMax)
}

// Meta returns tenant's table name, or a *code.Error table_not_found.
func (t *Tables) Meta(ctx context.Context, tenant, name string) (Meta, error) {
	if !ValidTableName(name) {
		return Meta{}, InvalidTableName(name)
	}
	it, err := t.store.Get(ctx, metaKey(tenant, name))
	if errors.Is(err, store.ErrNotFound) {
		it, err = store.Item{}, nil
	}
	if err != nil {
		return Meta{}, err
	}
	return t.metaOf(tenant, name, it)
}

// MetaKey is where tenant's table name lives, for a caller that reads it
// together with other keys (store.GetAll) and hands the item to
// PreflightWithMeta.
func MetaKey(tenant, name string) []byte { return metaKey(tenant, name) }

// metaOf decodes the metadata item read at metaKey(tenant, name); an item
// of version 0 is a table that does not exist.
func (t *Tables) metaOf(tenant, name string, it store.Item) (Meta, error) {
	ck := cacheKey(tenant, name)
	if it.Version == 0 {
		t.metas.Delete(ck)
		return Meta{}, tableNotFound(name)
	}
	// Metadata changes only when a table is created or dropped, and the
	// store's version says when: a decoded copy is reused until it moves.
	if c, ok := t.metas.Load(ck); ok && c.(Meta).Version == it.Version {
		return c.(Meta), nil
	}
	m, err := decodeMeta(it.Key, it.Value)
	if err == nil && (m.Tenant != tenant || m.Name != name) {
		err = store.RecordError(it.Key, "table: metadata", fmt.Errorf("it names table %q of another tenant", m.Name))
	}
	if err != nil {
		return Meta{}, err
	}
	m.Version = it.Version
	t.metas.Store(ck, m)
	return m, nil
}

// Create creates tenant's table with the given number of shards (0 =
// DefaultShards). Creating an existing table returns it with created=false.
func (t *Tables) Create(ctx context.Context, tenant, name string, shards int) (m Meta, created bool, err error) {
	if !ValidTableName(name) {
		return Meta{}, false, InvalidTableName(name)
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
	m = Meta{Name: name, ID: hex.EncodeToString(id[:]), Shards: shards, Created: t.now().UnixMilli(), Tenant: tenant}
	val, err := encodeMeta(m)
	if err != nil {
		return Meta{}, false, err
	}
	key := metaKey(tenant, name)
	v, err := t.store.Apply(ctx, new(store.Batch).Absent(key).Put(key, val))
	if errors.Is(err, store.ErrConditionFailed) {
		existing, err := t.Meta(ctx, tenant, name)
		return existing, false, err
	}
	if err != nil {
		return Meta{}, false, err
	}
	m.Version = v
	return m, true, nil
}

// Drop removes tenant's table. Its documents are purged in bounded
// batches; if the process stops part-way, Purge finishes the job later.
func (t *Tables) Drop(ctx context.Context, tenant, name string) error {
	m, err := t.Meta(ctx, tenant, name)
	if err != nil {
		return err
	}
	_, err = t.store.Apply(ctx, new(store.Batch).
		AtVersion(metaKey(tenant, name), m.Version).
		Delete(metaKey(tenant, name)).
		Put(droppedKey(m.ID), []byte(name)))
	if errors.Is(err, store.ErrConditionFailed) {
		return tableNotFound(name) // dropped (or recreated) concurrently
	}
	if err != nil {
		return err
	}
	return t.purge(ctx, m.ID)
}

// Purge finishes the document purges of dropped tables.
func (t *Tables) Purge(ctx context.Context) error {
	prefix := store.NSMeta.Prefix("dropped")
	items, err := t.store.Scan(ctx, prefix, store.PrefixEnd(prefix), min(TablesListMax, t.store.Limits().ScanItemsMax))
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
	for _, prefix := range [][]byte{store.NSIntent.Prefix(id), docPrefix(id)} {
		for {
			// One delete per item: as many as the store takes per call.
			lim := t.store.Limits()
			items, err := t.store.Scan(ctx, prefix, store.PrefixEnd(prefix), min(purgeBatchMax, lim.ScanItemsMax, lim.Fit(1, 0, 0, 0)))
			if err != nil {
				return err
			}
			if len(items) == 0 {
				break
			}
			b := new(store.Batch)
			for _, it := range items {
				b.Delete(it.Key)
			}
			if _, err := t.store.Apply(ctx, b); err != nil {
				return err
			}
		}
	}
	_, err := t.store.Apply(ctx, new(store.Batch).Delete(droppedKey(id)))
	return err
}

// List returns tenant's tables in name order after the name after ("" for
// the first), at most limit of them (1..TablesListMax; 0 means
// TablesListMax), and the name to pass as after for the next page ("" when
// there is none).
func (t *Tables) List(ctx context.Context, tenant, after string, limit int) ([]Meta, string, error) {
	if limit <= 0 || limit > TablesListMax {
		limit = TablesListMax
	}
	// One more than the page, to learn whether there is a next one: a
	// store that scans fewer gets shorter pages, never an invalid scan.
	limit = min(limit, t.store.Limits().ScanItemsMax-1)
	prefix := tenantPrefix(tenant)
	start := prefix
	if after != "" {
		start = append(metaKey(tenant, after), 0)
	}
	items, err := t.store.Scan(ctx, start, store.PrefixEnd(prefix), limit+1)
	if err != nil {
		return nil, "", err
	}
	more := len(items) > limit
	items = items[:min(len(items), limit)]
	out := make([]Meta, 0, len(items))
	for _, it := range items {
		m, err := decodeMeta(it.Key, it.Value)
		if err != nil {
			return nil, "", err
		}
		m.Version = it.Version
		out = append(out, m)
	}
	next := ""
	if more && len(out) > 0 {
		next = out[len(out)-1].Name
	}
	return out, next, nil
}

// migrateBatchMax bounds the tables one MigrateLegacy Apply moves.
const migrateBatchMax = 64

// MigrateLegacy gives every table created before tables had tenants to
// owner, moving its metadata to owner's namespace (its documents, keyed by
// table ID, stay where they are). Each move is atomic and conditioned on
// both keys, so a crash part-way leaves every table in exactly one place
// and a later call finishes the job. It reports how many tables it moved.
func (t *Tables) MigrateLegacy(ctx context.Context, owner string) (int, error) {
	// Where tables lived before they had tenants: meta/v1/table/<name>.
	prefix := store.NSMeta.Prefix("table")
	moved := 0
	for {
		// Two deletes-or-puts and two conditions per table moved.
		lim := t.store.Limits()
		items, err := t.store.Scan(ctx, prefix, store.PrefixEnd(prefix), min(migrateBatchMax, lim.ScanItemsMax, lim.Fit(2, 2, 0, 0)))
		if err != nil || len(items) == 0 {
			return moved, err
		}
		b := new(store.Batch)
		for _, it := range items {
			m, err := decodeMeta(it.Key, it.Value)
			if err != nil {
				return moved, err
			}
			m.Tenant = owner
			val, err := encodeMeta(m)
			if err != nil {
				return moved, err
			}
			key := metaKey(owner, m.Name)
			b.AtVersion(it.Key, it.Version).Delete(it.Key).Absent(key).Put(key, val)
		}
		if _, err := t.store.Apply(ctx, b); err != nil {
			if k, ok := store.FailedKey(err); ok && store.NSMeta.Has(k) && !bytes.HasPrefix(k, prefix) {
				return moved, fmt.Errorf("table: cannot give a legacy table to %q: it already has a table of that name (%q)", owner, k)
			}
			return moved, err
		}
		moved += len(items)
	}
}
