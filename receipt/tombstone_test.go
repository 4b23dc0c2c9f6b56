package receipt_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

const (
	tombRetain  = time.Hour
	tombProtect = 48 * time.Hour
)

// tombstones opens a service keeping receipts tombRetain and keys
// tombProtect, with table "t".
func tombstones(t *testing.T, e *env) *receipt.Service {
	t.Helper()
	svc := e.open(receipt.Options{Retention: tombRetain, TombstoneRetention: tombProtect})
	createTable(t, svc, "t")
	return svc
}

// wantExpired checks the refusal of an expired key: 409 idempotency_key_expired,
// the key's transaction ID and the original outcome, final (new key).
func wantExpired(t *testing.T, a receipt.Answer, id string, same bool) {
	t.Helper()
	o := a.Original
	if a.Status != 409 || a.Code != code.KeyExpired || a.Retryable || a.RetryWith != code.NewKey || a.TxnID != id || a.Terminal ||
		o == nil || o.TxnID != id || o.State != receipt.Expired || o.Outcome != receipt.OutcomeCommitted || o.SameRequest != same {
		t.Fatalf("answer %+v original %+v, want 409 %s for %s (same request %v)", a, o, code.KeyExpired, id, same)
	}
	if a.Outcome != receipt.OutcomeNotApplied {
		t.Fatalf("outcome %q: this request was not applied", a.Outcome)
	}
	if a.Expiry.ProtectUntil.IsZero() || !a.Expiry.ReplayUntil.IsZero() {
		t.Fatalf("expiry %+v: want the protection only", a.Expiry)
	}
}

func cleanN(t *testing.T, svc *receipt.Service, want int) {
	t.Helper()
	if n, err := svc.CleanOnce(ctx); n != want || err != nil {
		t.Fatalf("CleanOnce = %d, %v; want %d", n, err, want)
	}
}

func tombCount(t *testing.T, st store.Store) int {
	t.Helper()
	items, err := st.Scan(ctx, []byte(store.NSTomb), store.PrefixEnd([]byte(store.NSTomb)), store.ScanLimitMax)
	if err != nil {
		t.Fatal(err)
	}
	return len(items)
}

func expiryEntries(t *testing.T, st store.Store) int {
	t.Helper()
	items, err := st.Scan(ctx, []byte(store.NSExpiry), store.PrefixEnd([]byte(store.NSExpiry)), store.ScanLimitMax)
	if err != nil {
		t.Fatal(err)
	}
	return len(items)
}

// expireOne executes alice's key k1 (an increment of ctr), lets its
// retention pass and runs the cleaner, which leaves its tombstone; it
// returns the request.
func expireOne(t *testing.T, e *env, svc *receipt.Service) receipt.Request {
	t.Helper()
	r := req(alice, "t", "k1", incBatch(t, "k1", "ctr"))
	mustExecute(t, svc, r)
	e.clock.Advance(tombRetain + time.Second)
	cleanN(t, svc, 1)
	return r
}

// TestTombstone_AnExpiredKeyIsRefusedAndNeverExecutesAgain: past its
// retention the receipt is cleaned, and the key — with the same request
// or another — answers 409 idempotency_key_expired with the original
// transaction ID and outcome, across a crash, with no second effect.
func TestTombstone_AnExpiredKeyIsRefusedAndNeverExecutesAgain(t *testing.T) {
	e := newEnv(t)
	svc := tombstones(t, e)
	r := req(alice, "t", "k1", incBatch(t, "k1", "ctr"))
	id := receipt.Bind(alice, "t", "k1")
	first := mustExecute(t, svc, r)
	wantCommitted(t, first, id, false)
	done := e.clock.Now()
	if got := first.Expiry; !got.ReplayUntil.Equal(done.Add(tombRetain).Truncate(time.Millisecond)) ||
		!got.ProtectUntil.Equal(done.Add(tombProtect).Truncate(time.Millisecond)) {
		t.Fatalf("fresh answer's expiry %+v, want replay until +%v and protection until +%v", got, tombRetain, tombProtect)
	}
	if again := mustExecute(t, svc, r); again.Expiry != first.Expiry {
		t.Fatalf("replay's expiry %+v, the fresh answer's %+v", again.Expiry, first.Expiry)
	}

	e.clock.Advance(tombRetain + time.Second)
	cleanN(t, svc, 1)
	if receiptExists(t, e.db, id) || tombCount(t, e.db) != 1 || svc.Stats().Tombstoned != 1 {
		t.Fatalf("after the cleaner: receipt %v, %d tombstones, stats %+v", receiptExists(t, e.db, id), tombCount(t, e.db), svc.Stats())
	}
	wantExpired(t, mustExecute(t, svc, r), id, true)
	wantExpired(t, mustExecute(t, svc, req(alice, "t", "k1", incBatch(t, "other", "ctr"))), id, false)
	if v := view(t, svc, alice, "t", "k1"); v.State != receipt.Expired || v.TxnID != id || v.Outcome != receipt.OutcomeCommitted ||
		!v.Expiry.ProtectUntil.Equal(first.Expiry.ProtectUntil) || !v.Completed.Equal(done.Truncate(time.Millisecond)) {
		t.Fatalf("view %+v", v)
	}

	svc.Close()
	e.crash()
	svc = e.open(receipt.Options{Retention: tombRetain, TombstoneRetention: tombProtect})
	wantExpired(t, mustExecute(t, svc, r), id, true)
	if got := counter(t, svc, "t", "ctr"); got != 1 {
		t.Fatalf("counter %d: the expired key executed again", got)
	}
	// Another principal's same key is another receipt, and executes.
	createTableFor(t, svc, "bob", "t")
	if a := mustExecute(t, svc, req("bob", "t", "k1", incBatch(t, "k1", "ctr"))); a.Status != 201 || a.Replayed {
		t.Fatalf("bob's key: %+v", a)
	}
}

// TestTombstone_ProtectionEndsAndTheKeyIsNewAgain: once its protection
// ended, the tombstone and its chunk are cleaned and the key is a new
// request — as it would be at once with tombstones opted out.
func TestTombstone_ProtectionEndsAndTheKeyIsNewAgain(t *testing.T) {
	e := newEnv(t)
	svc := tombstones(t, e)
	r := expireOne(t, e, svc)
	e.clock.Advance(tombProtect - tombRetain - 2*time.Second)
	cleanN(t, svc, 0)
	if tombCount(t, e.db) != 1 {
		t.Fatal("a tombstone was cleaned before its protection ended")
	}
	e.clock.Advance(2 * time.Second)
	cleanN(t, svc, 0)
	if n, st := tombCount(t, e.db), svc.Stats(); n != 0 || st.TombsCleaned != 1 || expiryEntries(t, e.db) != 0 {
		t.Fatalf("%d tombstones, %d expiry entries left; stats %+v", n, expiryEntries(t, e.db), st)
	}
	if a := mustExecute(t, svc, r); a.Status != 201 || a.Replayed {
		t.Fatalf("after the protection: %+v", a)
	}
	if got := counter(t, svc, "t", "ctr"); got != 2 {
		t.Fatalf("counter %d, want 2", got)
	}
}

// TestTombstone_ManyBatchesOfTombstonesAreAllCleaned: more receipts than
// one cleanup Apply takes leave several chunks; each tombstone refuses its
// key, and at the end of the protection nothing is left.
func TestTombstone_ManyBatchesOfTombstonesAreAllCleaned(t *testing.T) {
	e := newEnv(t)
	svc := tombstones(t, e)
	const n = receipt.CleanBatchMax + 44
	for i := range n {
		k := fmt.Sprintf("k%d", i)
		mustExecute(t, svc, req(alice, "t", k, incBatch(t, k, "ctr")))
	}
	e.clock.Advance(tombRetain + time.Second)
	cleanN(t, svc, n)
	if got := tombCount(t, e.db); got != n {
		t.Fatalf("%d tombstones, want %d", got, n)
	}
	if got := expiryEntries(t, e.db); got < 2 || got > 4 {
		t.Fatalf("%d expiry entries (chunks) for %d tombstones", got, n)
	}
	for _, i := range []int{0, n / 2, n - 1} {
		k := fmt.Sprintf("k%d", i)
		wantExpired(t, mustExecute(t, svc, req(alice, "t", k, incBatch(t, k, "ctr"))), receipt.Bind(alice, "t", k), true)
	}
	e.clock.Advance(tombProtect)
	cleanN(t, svc, 0)
	if tombCount(t, e.db) != 0 || expiryEntries(t, e.db) != 0 {
		t.Fatalf("left: %d tombstones, %d expiry entries", tombCount(t, e.db), expiryEntries(t, e.db))
	}
	if got := counter(t, svc, "t", "ctr"); got != n {
		t.Fatalf("counter %d, want %d", got, n)
	}
}

// TestTombstone_ACrashCleaningTombstonesConverges: the tombstone cleaner
// fails before its Apply, and the process crashes; nothing is lost (the
// key stays refused), and the next pass cleans everything.
func TestTombstone_ACrashCleaningTombstonesConverges(t *testing.T) {
	e := newEnv(t)
	svc := tombstones(t, e)
	expireOne(t, e, svc)
	id := receipt.Bind(alice, "t", "k1")
	e.clock.Advance(tombProtect)
	disarm := testsupport.Arm(t, fault.TombCleanBefore, `return("crash")`)
	if _, err := svc.CleanOnce(ctx); err == nil {
		t.Fatal("the failpoint did not fire")
	}
	disarm()
	svc.Close()
	e.crash()
	if _, err := e.db.Get(ctx, receipt.TombstoneKey(id)); err != nil {
		t.Fatalf("the failed pass lost the tombstone: %v", err)
	}
	svc = e.open(receipt.Options{Retention: tombRetain, TombstoneRetention: tombProtect})
	cleanN(t, svc, 0)
	if tombCount(t, e.db) != 0 || expiryEntries(t, e.db) != 0 {
		t.Fatalf("left: %d tombstones, %d expiry entries", tombCount(t, e.db), expiryEntries(t, e.db))
	}
}

// TestTombstone_ACleanupCrashLeavesReceiptOrTombstoneNeverNeither: a
// crash before the cleanup Apply leaves the receipt (it replays); the
// Apply that deletes it writes its tombstone in the same batch.
func TestTombstone_ACleanupCrashLeavesReceiptOrTombstoneNeverNeither(t *testing.T) {
	e := newEnv(t)
	svc := tombstones(t, e)
	r := req(alice, "t", "k1", incBatch(t, "k1", "ctr"))
	id := receipt.Bind(alice, "t", "k1")
	mustExecute(t, svc, r)
	e.clock.Advance(tombRetain + time.Second)
	disarm := testsupport.Arm(t, fault.ReceiptCleanBefore, `return("crash")`)
	if _, err := svc.CleanOnce(ctx); err == nil {
		t.Fatal("the failpoint did not fire")
	}
	disarm()
	svc.Close()
	e.crash()
	svc = e.open(receipt.Options{Retention: tombRetain, TombstoneRetention: tombProtect})
	wantCommitted(t, mustExecute(t, svc, r), id, true)
	cleanN(t, svc, 1)
	e.crashKeeping(nil)
	e.openDB()
	svc = e.open(receipt.Options{Retention: tombRetain, TombstoneRetention: tombProtect})
	wantExpired(t, mustExecute(t, svc, r), id, true)
	if got := counter(t, svc, "t", "ctr"); got != 1 {
		t.Fatalf("counter %d", got)
	}
}

// TestTombstone_AStaleReadOfTheTombstoneStillNeverExecutes: the lookup
// does not see the tombstone (a stale read); the create's condition on
// its absence refuses the write, and the retried lookup answers expired.
func TestTombstone_AStaleReadOfTheTombstoneStillNeverExecutes(t *testing.T) {
	e := newEnv(t)
	hs := &hookStore{Store: e.db}
	svc := e.openOn(hs, receipt.Options{Retention: tombRetain, TombstoneRetention: tombProtect})
	createTable(t, svc, "t")
	r := expireOne(t, e, svc)
	id := receipt.Bind(alice, "t", "k1")
	stale := 0
	hs.onGet(func(key []byte) error {
		if store.NSTomb.Has(key) && stale == 0 {
			stale++
			return store.ErrNotFound
		}
		return nil
	})
	wantExpired(t, mustExecute(t, svc, r), id, true)
	if stale != 1 {
		t.Fatal("the stale read was not served")
	}
	if got := counter(t, svc, "t", "ctr"); got != 1 {
		t.Fatalf("counter %d: executed again", got)
	}
}

// TestTombstone_OptedOutAnExpiredKeyExecutesAgain: with TombstoneRetention
// negative the cleaner leaves nothing, and the answers promise no more
// than the replay.
func TestTombstone_OptedOutAnExpiredKeyExecutesAgain(t *testing.T) {
	e := newEnv(t)
	svc := e.open(receipt.Options{Retention: tombRetain, TombstoneRetention: -1})
	createTable(t, svc, "t")
	r := req(alice, "t", "k1", incBatch(t, "k1", "ctr"))
	first := mustExecute(t, svc, r)
	if !first.Expiry.ProtectUntil.Equal(first.Expiry.ReplayUntil) {
		t.Fatalf("expiry %+v: protection beyond the replay with tombstones off", first.Expiry)
	}
	e.clock.Advance(tombRetain + time.Second)
	cleanN(t, svc, 1)
	if tombCount(t, e.db) != 0 {
		t.Fatal("a tombstone with tombstones off")
	}
	if a := mustExecute(t, svc, r); a.Status != 201 || a.Replayed {
		t.Fatalf("%+v", a)
	}
}

// TestTombstone_TheValueDecodesToWhatWasKept: the encoding round-trips and
// a damaged value is refused, never read as a different tombstone.
func TestTombstone_ADamagedTombstoneIsAnErrorNotANewKey(t *testing.T) {
	e := newEnv(t)
	svc := tombstones(t, e)
	r := expireOne(t, e, svc)
	items, err := e.db.Scan(ctx, []byte(store.NSTomb), store.PrefixEnd([]byte(store.NSTomb)), 2)
	if err != nil || len(items) != 1 {
		t.Fatalf("%v %d", err, len(items))
	}
	bad := bytes.Clone(items[0].Value)
	bad[0] = 0x7f
	if _, err := e.db.Apply(ctx, new(store.Batch).Put(items[0].Key, bad)); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Execute(ctx, r); err == nil {
		t.Fatal("a damaged tombstone let the request through")
	}
	if got := counter(t, svc, "t", "ctr"); got != 1 {
		t.Fatalf("counter %d", got)
	}
}

// TestTombClean_ADamagedTombstoneStaysAndTheCleanerGoesOn: a tombstone that
// does not read (a damaged value-log record) cannot say whether it still
// protects its key: it stays, with its cleanup entry, while the pass goes
// on to the tombstones after it. Once it reads again, a later pass cleans it.
func TestTombClean_ADamagedTombstoneStaysAndTheCleanerGoesOn(t *testing.T) {
	e := newEnv(t)
	hs := &hookStore{Store: e.db}
	svc := e.openOn(hs, receipt.Options{Retention: tombRetain, TombstoneRetention: tombProtect})
	createTable(t, svc, "t")
	for _, k := range []string{"k1", "k2"} { // one cleanup entry each
		mustExecute(t, svc, req(alice, "t", k, incBatch(t, k, "ctr")))
		e.clock.Advance(tombRetain + time.Second)
		cleanN(t, svc, 1)
	}
	if n := tombCount(t, e.db); n != 2 {
		t.Fatalf("%d tombstones, want 2", n)
	}
	damaged := receipt.TombstoneKey(receipt.Bind(alice, "t", "k1"))
	hs.onGet(func(key []byte) error {
		if bytes.Equal(key, damaged) {
			return fmt.Errorf("%w: a flipped byte (test)", store.ErrCorruption)
		}
		return nil
	})
	e.clock.Advance(tombProtect + tombRetain)
	before := svc.Stats().TombsCleaned
	if _, err := svc.CleanOnce(ctx); err != nil {
		t.Fatalf("a pass over a damaged tombstone failed: %v", err)
	}
	if got := svc.Stats().TombsCleaned - before; got != 1 {
		t.Fatalf("%d tombstones cleaned past the damaged one, want 1", got)
	}
	if _, err := e.db.Get(ctx, damaged); err != nil {
		t.Fatalf("the damaged tombstone is gone: %v", err)
	}
	hs.clear()
	if _, err := svc.CleanOnce(ctx); err != nil || tombCount(t, e.db) != 0 {
		t.Fatalf("once it reads again: %v, %d tombstones left", err, tombCount(t, e.db))
	}
}
