package storetest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/idemdb/idem/store"
)

// atomicityBatches bounds the writer of checkScanAtomicity; the scanner
// scans until the writer is done, so the two overlap for the whole test.
const (
	atomicityBatches = 300
	atomicityKeys    = 4
)

// checkScanAtomicity: a writer applies batches that give every one of
// atomicityKeys keys the same new value; a concurrent scanner must always
// find them all equal — a Scan is a point-in-time view, never half a
// batch — and must see the values only grow.
func checkScanAtomicity(t *testing.T, s store.Store) {
	keyOf := func(i int) []byte { return []byte(fmt.Sprintf("atom-%d", i)) }
	put := func(n int) *store.Batch {
		b := new(store.Batch)
		for i := range atomicityKeys {
			b.Put(keyOf(i), []byte(fmt.Sprintf("%06d", n)))
		}
		return b
	}
	mustApply(t, s, put(0))
	var wg sync.WaitGroup
	done := make(chan struct{})
	var writeErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for n := 1; n <= atomicityBatches; n++ {
			if _, err := s.Apply(ctx, put(n)); err != nil {
				writeErr = err
				return
			}
		}
	}()
	var last []byte
	for scanning := true; scanning; {
		select {
		case <-done:
			scanning = false // one more scan after the writer ends
		default:
		}
		items, err := s.Scan(ctx, []byte("atom-"), []byte("atom."), atomicityKeys)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != atomicityKeys {
			t.Fatalf("scan found %d of %d keys", len(items), atomicityKeys)
		}
		for _, it := range items[1:] {
			if !bytes.Equal(it.Value, items[0].Value) || it.Version != items[0].Version {
				t.Fatalf("a scan saw half a batch: %q at %d beside %q at %d", it.Value, it.Version, items[0].Value, items[0].Version)
			}
		}
		if bytes.Compare(items[0].Value, last) < 0 {
			t.Fatalf("a scan went back in time: %q after %q", items[0].Value, last)
		}
		last = items[0].Value
	}
	wg.Wait()
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	if want := fmt.Sprintf("%06d", atomicityBatches); string(last) != want {
		t.Fatalf("the last scan saw %q, want %q", last, want)
	}
}
