package receipt_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
)

// etcdLimits are etcd's defaults as they bear on one Txn: 128 ops (and,
// separately, 128 compares) and 1.5 MiB per request.
var etcdLimits = store.Limits{ApplyOpsMax: 128, ApplyCondsMax: 128, ApplyBytesMax: 3 << 19, ScanItemsMax: 1000}

// TestStoreLimits_EveryBatchFitsTheStore: on a store that takes at most
// 128 ops and 128 conditions per Apply (and refuses more), the layers
// above size every batch from its Limits — releasing retained decisions,
// cleaning expired receipts, purging a dropped table — where they used to
// send 256 receipts' worth in one Apply.
func TestStoreLimits_EveryBatchFitsTheStore(t *testing.T) {
	const receipts = 300 // more than two full batches of the old fixed sizes
	e := newEnv(t)
	st := memstore.NewWithLimits(etcdLimits)
	// Two writes: decisions retained for maintenance to release in batches.
	svc := e.openOn(st, twoWrites(receipt.Options{Retention: time.Minute}))
	createTable(t, svc, "t")
	for i := range receipts {
		key := fmt.Sprintf("k%03d", i)
		wantCommitted(t, mustExecute(t, svc, req("alice", "t", key, incBatch(t, key, "ctr"))), receipt.Bind("alice", "t", key), false)
	}
	if _, err := svc.MaintainOnce(ctx); err != nil {
		t.Fatalf("maintenance (releases decisions): %v", err)
	}
	e.clock.Advance(2 * time.Minute)
	cleaned := 0
	for range receipts { // each pass cleans at least one batch; bounded
		n, err := svc.CleanOnce(ctx)
		if err != nil {
			t.Fatalf("clean: %v", err)
		}
		if n == 0 {
			break
		}
		cleaned += n
	}
	if cleaned != receipts {
		t.Fatalf("cleaned %d receipts, want %d", cleaned, receipts)
	}
	// Their tombstones, once the keys' protection ended, in chunks.
	e.clock.Advance(receipt.TombstoneRetentionDefault)
	if _, err := svc.CleanOnce(ctx); err != nil {
		t.Fatalf("clean tombstones: %v", err)
	}
	if got := svc.Stats().TombsCleaned; got != receipts {
		t.Fatalf("cleaned %d tombstones, want %d", got, receipts)
	}
	if got := svc.Stats().Released; got == 0 {
		t.Fatal("maintenance released no decision")
	}
	if err := svc.Tables().Drop(ctx, "alice", "t"); err != nil {
		t.Fatalf("drop a table of %d documents: %v", receipts+1, err)
	}
	left, err := st.Scan(ctx, nil, nil, etcdLimits.ScanItemsMax)
	if err != nil {
		t.Fatal(err)
	}
	// Receipts, expiry entries, decisions, documents and intents are all
	// gone; only the node's and the cleaner job's leases remain.
	for _, it := range left {
		if !bytes.HasPrefix(it.Key, []byte("lease/")) {
			t.Fatalf("left behind: %q", it.Key)
		}
	}
}
