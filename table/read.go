package table

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/store"
)

// Get reads a document of tenant's table. An intent on it is resolved on the fly: if its
// transaction committed, the intent's state is the document's state even
// before resolution has written it; otherwise the stored document is.
// Missing documents are *code.Error document_not_found.
func (t *Tables) Get(ctx context.Context, tenant, table, id string) (json.RawMessage, error) {
	m, err := t.Meta(ctx, tenant, table)
	if err != nil {
		return nil, err
	}
	if !validDocID(id) {
		return nil, invalid("invalid document id %q", id)
	}
	shard := ShardOf(id, m.Shards)
	notFound := code.Errorf(code.DocumentNotFound, "document %q does not exist in table %q", id, table)
	if it, err := t.store.Get(ctx, intentKey(m.ID, shard, id)); err == nil {
		var in intent
		if err := cbor.Unmarshal(it.Value, &in); err != nil {
			return nil, store.RecordError(it.Key, "table: intent of "+strconv.Quote(id), err)
		}
		if t.decisions != nil {
			committed, _, err := t.decisions(ctx, in.Txn)
			if err != nil {
				return nil, err
			}
			if fault.Planted(fault.BugReadServesIntent) { // planted only under -tags idem_selftest
				committed = true // planted bug: an undecided or aborted intent is served
			}
			if committed && !in.Read {
				if in.Deleted {
					return nil, notFound
				}
				return in.Doc, nil
			}
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	it, err := t.store.Get(ctx, docKey(m.ID, shard, id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	return it.Value, nil
}
