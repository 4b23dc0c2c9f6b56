package memstore_test

import (
	"errors"
	"testing"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
	"github.com/idemdb/idem/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return memstore.New() })
}

// TestConformance_WithEtcdLimits: the suite holds at a replicated store's
// much smaller limits too (etcd: 128 ops per Txn).
func TestConformance_WithEtcdLimits(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store {
		return memstore.NewWithLimits(store.Limits{ApplyOpsMax: 128, ApplyCondsMax: 128, ApplyBytesMax: 3 << 19, ScanItemsMax: 1000})
	})
}

// TestClose_EveryCallAfterIsErrClosed: a closed store answers nothing else.
func TestClose_EveryCallAfterIsErrClosed(t *testing.T) {
	s := memstore.New()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), []byte("a")); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("get: %v", err)
	}
	if _, err := s.Scan(t.Context(), nil, nil, 1); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("scan: %v", err)
	}
	if _, err := s.Apply(t.Context(), new(store.Batch).Put([]byte("a"), nil)); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("apply: %v", err)
	}
	if err := s.Close(); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
}
