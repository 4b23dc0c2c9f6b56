package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

// Reads never see an uncommitted intent (docs/design.md §12). The clients' reads
// cannot show it alone: the docs model lets a batch whose answer is not in
// yet take effect at any time, so a read of its undecided intent is
// linearizable unless the batch is later known not applied. So the auditor
// reads too, at the moments that matter: after every landed write that
// prepares a transaction (puts an intent) or decides one, it reads each
// document an intent covers, as a node reads it (table.Tables with the
// coordinator's decisions), and holds the answer to what the store proves
// — an intent whose transaction has not committed (undecided, or aborted
// and not yet resolved) leaves the document as stored. Reads bypass the
// gate, within the auditor's lock: nothing moves between what the reader
// and the check see.

// intentRecord mirrors the table package's intent encoding (table/shard.go:
// the harness decodes it itself, as it does tombstones).
type intentRecord struct {
	Txn     string `cbor:"1,keyasint"`
	Deleted bool   `cbor:"2,keyasint,omitempty"`
	Doc     []byte `cbor:"3,keyasint,omitempty"`
	Read    bool   `cbor:"4,keyasint,omitempty"`
}

// intentsScanMax bounds the intents one probe reads: the workload's
// batches touch a handful of documents each, far below it.
const intentsScanMax = 4096

var (
	intentPrefix = []byte(store.NSIntent)
	probedTables = []string{tableName, sessTable}
)

// preparesOrDecides reports whether batches put an intent or write a
// decision: a transaction was prepared or decided.
func preparesOrDecides(batches []*store.Batch) bool {
	for _, b := range batches {
		for _, op := range b.Ops {
			if (!op.Delete && bytes.HasPrefix(op.Key, intentPrefix)) || bytes.HasPrefix(op.Key, decisionPrefix) {
				return true
			}
		}
	}
	return false
}

// probeReads reads every document under an intent of an uncommitted
// transaction and reports each read that did not return the stored
// document.
func (a *auditor) probeReads(ctx context.Context) {
	tables, coord := table.NewWithCoordinator(a.store, twopc.Options{})
	names := map[string]string{} // table ID -> name
	for _, name := range probedTables {
		if m, err := tables.Meta(ctx, principal, name); err == nil {
			names[m.ID] = name
		}
	}
	items, err := a.store.Scan(ctx, intentPrefix, store.PrefixEnd(intentPrefix), intentsScanMax)
	if err != nil {
		return // a damaged store is the other checks' business
	}
	for _, it := range items {
		var in intentRecord
		if cbor.Unmarshal(it.Value, &in) != nil {
			a.violations = append(a.violations, fmt.Sprintf("undecodable intent %q", it.Key))
			continue
		}
		if committed, _, err := coord.Committed(ctx, in.Txn); err != nil || committed || in.Read {
			continue
		}
		if why := a.readsStored(ctx, tables, names, it.Key); why != "" {
			a.violations = append(a.violations, fmt.Sprintf("a read of a document under an intent of %s, which has not committed, %s", in.Txn, why))
		}
	}
}

// readsStored reads the document of intent key ik through tables and
// compares it with the stored document: "" when they agree.
func (a *auditor) readsStored(ctx context.Context, tables *table.Tables, names map[string]string, ik []byte) string {
	suffix := store.NSIntent.Suffix(ik) // <table ID>/<shard>/<doc>, as the document's key
	parts := bytes.SplitN(suffix, []byte("/"), 3)
	name, ok := names[string(parts[0])]
	if len(parts) != 3 || !ok {
		return ""
	}
	got, gerr := tables.Get(ctx, principal, name, string(parts[2]))
	stored, serr := a.store.Get(ctx, store.NSTable.Key(string(suffix)))
	var ce *code.Error
	missing := errors.As(gerr, &ce) && ce.Code == code.DocumentNotFound
	switch {
	case errors.Is(serr, store.ErrNotFound):
		if !missing {
			return fmt.Sprintf("returned %s %v; the document does not exist", got, gerr)
		}
	case serr != nil, gerr != nil && !missing:
		return "" // a read that failed shows nothing
	case missing:
		return fmt.Sprintf("returned document_not_found; the document is %s", stored.Value)
	case !bytes.Equal(got, stored.Value):
		return fmt.Sprintf("returned %s; the document is %s", got, stored.Value)
	}
	return ""
}
