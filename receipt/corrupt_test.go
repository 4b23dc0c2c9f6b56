package receipt_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// TestRecords_AReceiptThatDoesNotDecodeIsCorruption: bytes no version of
// Idem wrote at a receipt's key are the store's damage, named by key, for
// a lookup and for a retry of the key — never executed as a new request.
func TestRecords_AReceiptThatDoesNotDecodeIsCorruption(t *testing.T) {
	e := newEnv(t)
	svc := e.open(receipt.Options{})
	createTable(t, svc, "t")
	key := store.NSReceipt.Key(receipt.Bind(alice, "t", "k"))
	if _, err := e.db.Apply(ctx, new(store.Batch).Put(key, []byte{0xff, 0x01})); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Lookup(ctx, alice, "t", "k"); !errors.Is(err, store.ErrCorruption) || !strings.Contains(err.Error(), string(key)) {
		t.Fatalf("Lookup: %v, want ErrCorruption naming %q", err, key)
	}
	if _, err := svc.Execute(ctx, req(alice, "t", "k", incBatch(t, "k", "ctr"))); !errors.Is(err, store.ErrCorruption) {
		t.Fatalf("Execute: %v, want ErrCorruption", err)
	}
	if got := counter(t, svc, "t", "ctr"); got != 0 {
		t.Fatalf("counter %d: a key whose receipt is damaged executed", got)
	}
}
