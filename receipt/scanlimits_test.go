package receipt_test

import (
	"fmt"
	"testing"

	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
	"github.com/idemdb/idem/twopc"
)

// TestStoreLimits_EveryScanFitsTheStore: on a store that returns at most
// 16 items per Scan (and refuses a larger limit), the summary idemd logs
// at start, table listing and purge, and 2PC recovery all page within it
// — the summary used to ask etcd for 4096 at once, and idemd on etcd
// would not start.
func TestStoreLimits_EveryScanFitsTheStore(t *testing.T) {
	const receipts, tables = 40, 20
	e := newEnv(t)
	st := memstore.NewWithLimits(store.Limits{ApplyOpsMax: 128, ApplyCondsMax: 128, ApplyBytesMax: 1 << 20, ScanItemsMax: 16})
	svc := e.openOn(st, receipt.Options{})
	createTable(t, svc, "t")
	for i := range receipts {
		key := fmt.Sprintf("k%03d", i)
		wantCommitted(t, mustExecute(t, svc, req("alice", "t", key, incBatch(t, key, "ctr"))), receipt.Bind("alice", "t", key), false)
	}
	sum, err := svc.Summary(ctx)
	if err != nil || sum.Terminal != receipts || sum.Partial {
		t.Fatalf("summary %+v %v, want %d terminal", sum, err, receipts)
	}
	for i := range tables {
		createTable(t, svc, fmt.Sprintf("x%02d", i))
	}
	var names []string
	for after := ""; ; {
		page, next, err := svc.Tables().List(ctx, alice, after, 0)
		if err != nil {
			t.Fatalf("list after %q: %v", after, err)
		}
		for _, m := range page {
			names = append(names, m.Name)
		}
		if next == "" {
			break
		}
		after = next
	}
	if len(names) != tables+1 {
		t.Fatalf("listed %d tables in pages, want %d: %v", len(names), tables+1, names)
	}
	if _, err := svc.MaintainOnce(ctx); err != nil {
		t.Fatalf("maintenance (2PC recovery scans): %v", err)
	}
	if _, err := svc.Coordinator().Recover(ctx, twopc.RecoverOptions{}); err != nil {
		t.Fatalf("2PC recovery: %v", err)
	}
}
