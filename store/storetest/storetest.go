// Package storetest is the conformance suite of store.Store: one table of
// behaviours the contract promises, and a randomized history checked
// against a model. Every Store — engine.DB, the reference memstore, and
// the stores to come — runs it, so a layer written against the contract
// can trust any of them alike.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return open(t) })
//	}
package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/idemdb/idem/store"
)

// Open returns a new, empty store for one subtest; the suite never closes
// it (register cleanup in Open).
type Open func(t *testing.T) store.Store

// Run runs every behaviour of the contract, then the model-checked
// history, each as a subtest on a fresh store.
func Run(t *testing.T, open Open) {
	for _, b := range behaviours {
		t.Run(b.name, func(t *testing.T) { b.check(t, open(t)) })
	}
	t.Run("history", func(t *testing.T) { checkHistory(t, open(t), historySeed, historyOps) })
	t.Run("concurrent-cas", func(t *testing.T) { checkConcurrentCAS(t, open(t)) })
	t.Run("fencing-on-a-moved-record", func(t *testing.T) {
		for _, v := range FencingViolations(ctx, open(t)) {
			t.Error(v)
		}
	})
}

var ctx = context.Background()

func k(s string) []byte { return []byte(s) }

// mustApply applies b and returns its version, failing the test on error.
func mustApply(t *testing.T, s store.Store, b *store.Batch) store.Version {
	t.Helper()
	v, err := s.Apply(ctx, b)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if v == 0 {
		t.Fatal("apply: version 0")
	}
	return v
}

// mustGet returns key's item, failing unless it exists.
func mustGet(t *testing.T, s store.Store, key string) store.Item {
	t.Helper()
	it, err := s.Get(ctx, k(key))
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return it
}

// wantAbsent fails unless key is absent.
func wantAbsent(t *testing.T, s store.Store, key string) {
	t.Helper()
	if it, err := s.Get(ctx, k(key)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get %q: %+v, %v; want ErrNotFound", key, it, err)
	}
}

// wantItem fails unless key holds value at version v.
func wantItem(t *testing.T, s store.Store, key, value string, v store.Version) {
	t.Helper()
	it := mustGet(t, s, key)
	if !bytes.Equal(it.Key, k(key)) || !bytes.Equal(it.Value, k(value)) || it.Version != v {
		t.Fatalf("get %q: {%q %q %d}, want {%q %q %d}", key, it.Key, it.Value, it.Version, key, value, v)
	}
}
