package receipt_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
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

// TestRecords_AReceiptThatBreaksItsInvariantsIsCorruption: a receipt that
// decodes but breaks an invariant — here a terminal record without its
// envelope, which would replay the generic abort, a wrong answer — is the
// store's damage named by key, on the reference store, for a lookup and a
// retry; the retry executes nothing.
func TestRecords_AReceiptThatBreaksItsInvariantsIsCorruption(t *testing.T) {
	e := newEnv(t)
	st := memstore.New()
	svc := e.openOn(st, receipt.Options{})
	createTable(t, svc, "t")
	key := store.NSReceipt.Key(receipt.Bind(alice, "t", "k"))
	_, fp, err := receipt.Canonical("t", incBatch(t, "k", "ctr"))
	if err != nil {
		t.Fatal(err)
	}
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		t.Fatal(err)
	}
	bad := receipt.Record{Schema: receipt.SchemaCurrent, Principal: alice, Table: "t", Key: "k", Fingerprint: fp[:],
		State: receipt.Terminal, Created: 1, Completed: 2, RetainUntil: 1 << 50}
	if _, err := receipt.EncodeRecord(&bad); !errors.Is(err, store.ErrInvariant) {
		t.Fatalf("EncodeRecord: %v, want store.ErrInvariant", err)
	}
	raw, err := em.Marshal(&bad) // forced past EncodeRecord's check
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(ctx, new(store.Batch).Put(key, raw)); err != nil {
		t.Fatal(err)
	}
	named := func(op string, err error) {
		t.Helper()
		if k, ok := store.DamagedKey(err); !errors.Is(err, store.ErrCorruption) || !ok || !bytes.Equal(k, key) ||
			!strings.Contains(err.Error(), fmt.Sprintf("%q", key)) {
			t.Fatalf("%s: %v, want ErrCorruption naming %q", op, err, key)
		}
	}
	_, err = svc.Lookup(ctx, alice, "t", "k")
	named("Lookup", err)
	ans, err := svc.Execute(ctx, req(alice, "t", "k", incBatch(t, "k", "ctr")))
	named("Execute", err)
	if ans.Status != 0 || ans.Terminal {
		t.Fatalf("Execute answered %+v beside its error", ans)
	}
	if got := counter(t, svc, "t", "ctr"); got != 0 {
		t.Fatalf("counter %d: a key whose receipt is damaged executed", got)
	}
}

// TestRecords_ASessionThatBreaksItsInvariantsIsCorruption: a session
// record that decodes but breaks an invariant — committed, without the
// transaction of its commit — is the store's damage named by key.
func TestRecords_ASessionThatBreaksItsInvariantsIsCorruption(t *testing.T) {
	e := newEnv(t)
	st := memstore.New()
	svc := e.openOn(st, receipt.Options{})
	const id = "s0123456789abcdef0123456789abcdef"
	if !receipt.ValidSessionID(id) {
		t.Fatalf("%s is not a session ID", id)
	}
	key := store.NSSession.Key("rec", id)
	bad := receipt.SessionRecord{Schema: receipt.SessionSchemaCurrent, Principal: alice, State: receipt.SessionCommitted,
		Created: 1, Expires: 2, Key: "k", Ended: 2, RetainUntil: 1 << 50}
	if _, err := receipt.EncodeSession(&bad); !errors.Is(err, store.ErrInvariant) {
		t.Fatalf("EncodeSession: %v, want store.ErrInvariant", err)
	}
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := em.Marshal(&bad) // forced past EncodeSession's check
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(ctx, new(store.Batch).Put(key, raw)); err != nil {
		t.Fatal(err)
	}
	_, err = svc.SessionInfo(ctx, alice, id)
	if k, ok := store.DamagedKey(err); !errors.Is(err, store.ErrCorruption) || !ok || !bytes.Equal(k, key) ||
		!strings.Contains(err.Error(), fmt.Sprintf("%q", key)) {
		t.Fatalf("SessionInfo: %v, want ErrCorruption naming %q", err, key)
	}
}
