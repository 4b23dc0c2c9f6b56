package receipt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// Retention and the fold's bounds at that retention (expfold.go: a minute
// each, under an eighth of the retention).
const (
	foldRetain = time.Hour
	foldAge    = time.Minute
	chunkSpan  = time.Minute
)

// expiryShape counts the expiry index's plain receipt entries, its receipt
// chunks and the receipts those list.
func expiryShape(t *testing.T, st store.Store) (plain, chunks, chunked int) {
	t.Helper()
	items, err := st.Scan(ctx, []byte(store.NSExpiry), store.PrefixEnd([]byte(store.NSExpiry)), store.ScanLimitMax)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		rest := string(store.NSExpiry.Suffix(it.Key))
		switch {
		case strings.HasPrefix(rest, "c/"):
			chunks++
			chunked += len(it.Value) / 24
		case len(rest) == 21+32:
			plain++
		}
	}
	return plain, chunks, chunked
}

// foldWorkload executes n keys of alice's, one a second, and answers the
// requests and when each completed.
func foldWorkload(t *testing.T, e *env, svc *receipt.Service, n int) ([]receipt.Request, []time.Time) {
	t.Helper()
	createTable(t, svc, "t")
	var reqs []receipt.Request
	var done []time.Time
	for i := range n {
		k := fmt.Sprintf("k%d", i)
		r := req(alice, "t", k, incBatch(t, k, "ctr"))
		mustExecute(t, svc, r)
		reqs, done = append(reqs, r), append(done, e.clock.Now())
		e.clock.Advance(time.Second)
	}
	return reqs, done
}

// TestExpiryFold_ReceiptsAreCleanedNeitherEarlyNorLate: entries older than
// the fold age become chunks (RAM: one key per chunk), the receipts still
// replay, and the cleaner deletes each receipt no earlier than its
// deadline and no later than a chunk's span after it, leaving nothing of
// the index; no batch runs twice.
func TestExpiryFold_ReceiptsAreCleanedNeitherEarlyNorLate(t *testing.T) {
	e := newEnv(t)
	svc := e.open(receipt.Options{Retention: foldRetain})
	const n = 300
	reqs, done := foldWorkload(t, e, svc, n)

	cleanN(t, svc, 0)
	plain, chunks, chunked := expiryShape(t, e.db)
	young := int(foldAge / time.Second)
	if chunked < n-young-1 || chunked > n-young+1 {
		t.Fatalf("after one pass: %d plain entries, %d receipts in %d chunks; want all but the last %d folded", plain, chunked, chunks, young)
	}
	e.clock.Advance(foldAge)
	cleanN(t, svc, 0)
	plain, chunks, chunked = expiryShape(t, e.db)
	if plain != 0 || chunked != n || chunks < int(time.Duration(n)*time.Second/chunkSpan) {
		t.Fatalf("%d plain entries, %d receipts in %d chunks; want all %d folded, a chunk spanning at most %v", plain, chunked, chunks, n, chunkSpan)
	}
	for _, i := range []int{0, n / 2, n - 1} {
		if a := mustExecute(t, svc, reqs[i]); !a.Replayed {
			t.Fatalf("key %d after the fold: %+v, want a replay", i, a)
		}
	}

	const step = 10 * time.Second
	e.clock.Advance(done[0].Add(foldRetain - step).Sub(e.clock.Now()))
	for gone := 0; gone < n; {
		if e.clock.Now().After(done[n-1].Add(foldRetain + chunkSpan + 2*step)) {
			t.Fatalf("%d of %d receipts cleaned long after every deadline", gone, n)
		}
		if _, err := svc.CleanOnce(ctx); err != nil {
			t.Fatal(err)
		}
		now := e.clock.Now()
		gone = 0
		for i, r := range reqs {
			exists := receiptExists(t, e.db, receipt.Bind(alice, "t", r.Key))
			deadline := done[i].Add(foldRetain)
			switch {
			case !exists && now.Before(deadline):
				t.Fatalf("key %d cleaned at %v, before its deadline %v", i, now, deadline)
			case exists && !now.Before(deadline.Add(chunkSpan)):
				t.Fatalf("key %d still there at %v, a chunk's span after its deadline %v", i, now, deadline)
			case !exists:
				gone++
			}
		}
		e.clock.Advance(step)
	}
	if plain, chunks, _ := expiryShape(t, e.db); plain != 0 || chunks != 0 {
		t.Fatalf("left: %d plain entries, %d chunks", plain, chunks)
	}
	if got := counter(t, svc, "t", "ctr"); got != n {
		t.Fatalf("counter %d, want %d", got, n)
	}
	if st := svc.Stats(); st.Folded != n || st.Cleaned != n {
		t.Fatalf("stats: folded %d, cleaned %d; want %d each", st.Folded, st.Cleaned, n)
	}
}

// TestExpiryFold_ACrashAtTheFoldOrTheChunkConverges: a crash before the
// fold's Apply leaves the entries; one between the cleanup of a chunk's
// receipts and the chunk's rewrite leaves the chunk, walked again. Either
// way the next passes fold and clean everything, once.
func TestExpiryFold_ACrashAtTheFoldOrTheChunkConverges(t *testing.T) {
	e := newEnv(t)
	opts := receipt.Options{Retention: foldRetain}
	svc := e.open(opts)
	const n = 40
	reqs, _ := foldWorkload(t, e, svc, n)
	e.clock.Advance(foldAge)

	disarm := testsupport.Arm(t, fault.ExpiryFoldBefore, `return("crash")`)
	if _, err := svc.CleanOnce(ctx); err == nil {
		t.Fatal("the fold's failpoint did not fire")
	}
	disarm()
	svc.Close()
	e.crash()
	if plain, chunks, _ := expiryShape(t, e.db); plain != n || chunks != 0 {
		t.Fatalf("after a crash before the fold: %d plain entries, %d chunks; want %d, 0", plain, chunks, n)
	}
	svc = e.open(opts)
	cleanN(t, svc, 0)
	if plain, _, chunked := expiryShape(t, e.db); plain != 0 || chunked != n {
		t.Fatalf("after the fold: %d plain entries, %d folded; want 0, %d", plain, chunked, n)
	}

	e.clock.Advance(foldRetain + chunkSpan)
	disarm = testsupport.Arm(t, fault.ChunkCleanBefore, `return("crash")`)
	if _, err := svc.CleanOnce(ctx); err == nil {
		t.Fatal("the chunk's failpoint did not fire")
	}
	disarm()
	svc.Close()
	e.crash()
	if _, chunks, _ := expiryShape(t, e.db); chunks == 0 {
		t.Fatal("the crash before the chunk's rewrite lost the chunk")
	}
	svc = e.open(opts)
	for range 4 {
		if _, err := svc.CleanOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if plain, chunks, _ := expiryShape(t, e.db); plain != 0 || chunks != 0 {
		t.Fatalf("left: %d plain entries, %d chunks", plain, chunks)
	}
	for i, r := range reqs {
		if receiptExists(t, e.db, receipt.Bind(alice, "t", r.Key)) {
			t.Fatalf("key %d not cleaned", i)
		}
		if i%10 == 0 {
			wantExpired(t, mustExecute(t, svc, r), receipt.Bind(alice, "t", r.Key), true)
		}
	}
	if got := counter(t, svc, "t", "ctr"); got != n {
		t.Fatalf("counter %d, want %d", got, n)
	}
}

// TestExpiryFold_AListingPagesThroughChunksOnce: a listing of terminal
// receipts, in pages smaller than a chunk and across chunks and plain
// entries, answers every receipt once, in completion order.
func TestExpiryFold_AListingPagesThroughChunksOnce(t *testing.T) {
	e := newEnv(t)
	svc := e.open(receipt.Options{Retention: foldRetain})
	const n = 150
	reqs, _ := foldWorkload(t, e, svc, n)
	cleanN(t, svc, 0) // folds all but the last minute's
	if plain, chunks, _ := expiryShape(t, e.db); plain == 0 || chunks < 2 {
		t.Fatalf("%d plain entries, %d chunks: want both", plain, chunks)
	}
	var got []string
	var after []byte
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("the listing does not end")
		}
		p, err := svc.List(ctx, receipt.ListFilter{Terminal: true, Limit: 7, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range p.Receipts {
			got = append(got, l.Key)
		}
		if p.Next == nil {
			break
		}
		after = p.Next
	}
	if len(got) != n {
		t.Fatalf("listed %d receipts, want %d: %v", len(got), n, got)
	}
	for i, r := range reqs {
		if got[i] != r.Key {
			t.Fatalf("listing[%d] = %s, want %s (completion order)", i, got[i], r.Key)
		}
	}
}

// TestExpiryFold_ADamagedChunkOrReceiptStopsNothingElse: a chunk whose
// value-log record is damaged is passed over by the cleaner, a listing
// and the summary; a damaged receipt in a chunk stays, with a chunk of
// its own; everything else is cleaned.
func TestExpiryFold_ADamagedChunkOrReceiptStopsNothingElse(t *testing.T) {
	for _, damage := range []string{"chunk", "receipt"} {
		t.Run(damage, func(t *testing.T) {
			e := newEnv(t)
			svc := e.open(receipt.Options{Retention: foldRetain})
			const n = 150
			reqs, _ := foldWorkload(t, e, svc, n)
			if damage == "chunk" {
				// Receipts first: the chunks are then the log's last records.
				if err := e.db.Checkpoint(); err != nil {
					t.Fatal(err)
				}
			}
			e.clock.Advance(foldAge)
			cleanN(t, svc, 0)
			if err := e.db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			_, chunks, _ := expiryShape(t, e.db)
			e.flipValueLogByte(t, 2)
			e.clock.Advance(foldRetain + 2*chunkSpan + time.Duration(n)*time.Second)
			for range 4 {
				if _, err := svc.CleanOnce(ctx); err != nil {
					t.Fatalf("cleaner: %v", err)
				}
			}
			left := 0
			for _, r := range reqs {
				_, err := e.db.Get(ctx, store.NSReceipt.Key(receipt.Bind(alice, "t", r.Key)))
				switch {
				case err == nil || errors.Is(err, store.ErrCorruption):
					left++
				case !errors.Is(err, store.ErrNotFound):
					t.Fatal(err)
				}
			}
			if _, err := svc.List(ctx, receipt.ListFilter{Terminal: true}); err != nil {
				t.Fatalf("listing: %v", err)
			}
			if _, err := svc.Summary(ctx); err != nil {
				t.Fatalf("summary: %v", err)
			}
			switch damage {
			case "chunk":
				if left == 0 || left > n/chunks+int(chunkSpan/time.Second) {
					t.Fatalf("%d receipts left, want those of the damaged chunk only (%d chunks)", left, chunks)
				}
			case "receipt":
				plain, chunks, chunked := expiryShape(t, e.db)
				if left != 1 || plain != 0 || chunks != 1 || chunked != 1 {
					t.Fatalf("%d receipts left, %d plain entries, %d chunks listing %d; want the damaged one in a chunk of its own",
						left, plain, chunks, chunked)
				}
			}
			if got := counter(t, svc, "t", "ctr"); got != n {
				t.Fatalf("counter %d, want %d", got, n)
			}
		})
	}
}

// TestExpiryFold_AReceiptWhoseCleanupConditionFailsStaysInItsChunk: the
// cleanup Apply of a chunk's receipts fails on one receipt's condition (it
// changed since it was read); the others are deleted, and the chunk is
// written again listing that one, which the next pass cleans — no receipt
// is left without an entry.
func TestExpiryFold_AReceiptWhoseCleanupConditionFailsStaysInItsChunk(t *testing.T) {
	e := newEnv(t)
	hs := &hookStore{Store: e.db}
	svc := e.openOn(hs, receipt.Options{Retention: foldRetain})
	const n = 5
	reqs, _ := foldWorkload(t, e, svc, n)
	e.clock.Advance(foldAge)
	cleanN(t, svc, 0)
	if _, chunks, chunked := expiryShape(t, e.db); chunks != 1 || chunked != n {
		t.Fatalf("%d chunks listing %d, want one listing %d", chunks, chunked, n)
	}
	// The middle receipt of the chunk's cleanup batch refuses, once.
	refused := store.NSReceipt.Key(receipt.Bind(alice, "t", reqs[2].Key))
	once := false
	hs.onApply(func(_ context.Context, b *store.Batch) (store.Version, error, bool) {
		if once || !deletesKey(b, refused) {
			return 0, nil, false
		}
		once = true
		return 0, &store.ConditionError{Cond: store.Condition{Key: refused, Kind: store.MustBeAtVersion, Version: 1}, Found: 2}, true
	})
	e.clock.Advance(foldRetain + chunkSpan)
	cleanN(t, svc, n-1)
	if !once {
		t.Fatal("the hook never refused")
	}
	if _, chunks, chunked := expiryShape(t, e.db); chunks != 1 || chunked != 1 {
		t.Fatalf("after the refusal: %d chunks listing %d receipts; want the refused one, alone", chunks, chunked)
	}
	cleanN(t, svc, 1)
	if plain, chunks, _ := expiryShape(t, e.db); plain != 0 || chunks != 0 || receiptExists(t, e.db, receipt.Bind(alice, "t", reqs[2].Key)) {
		t.Fatalf("left: %d plain entries, %d chunks, or the refused receipt", plain, chunks)
	}
}

// deletesKey reports whether b deletes key.
func deletesKey(b *store.Batch, key []byte) bool {
	for _, op := range b.Ops {
		if op.Delete && bytes.Equal(op.Key, key) {
			return true
		}
	}
	return false
}
