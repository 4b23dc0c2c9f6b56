package testsupport

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/idemdb/idem/engine"
)

// OnReferenceStore reports whether the tests of this run go on the
// reference store (engine/memstore) instead of engine.DB:
// IDEM_TEST_STORE=memstore, which make test sets for a second run of the
// layers above the engine. Tests that need what only engine.DB has — a
// crash that keeps exactly what was fsynced, chaining — skip there
// (SkipOnReferenceStore).
func OnReferenceStore() bool { return os.Getenv("IDEM_TEST_STORE") == "memstore" }

// SkipOnReferenceStore skips t on the reference store, saying why.
func SkipOnReferenceStore(t testing.TB, why string) {
	t.Helper()
	if OnReferenceStore() {
		t.Skip("on the reference store: " + why)
	}
}

// Dump renders every item of s, in key order, one per line with its
// version: two dumps are equal exactly when the stores hold the same
// state. It pages by s.Limits().ScanItemsMax, so it works on any store.
func Dump(t testing.TB, s engine.Store) string {
	t.Helper()
	var sb strings.Builder
	var start []byte
	for {
		items, err := s.Scan(context.Background(), start, nil, s.Limits().ScanItemsMax)
		if err != nil {
			t.Fatalf("dump: %v", err)
		}
		for _, it := range items {
			fmt.Fprintf(&sb, "%s@%d=%x\n", it.Key, it.Version, it.Value)
		}
		if len(items) < s.Limits().ScanItemsMax {
			return sb.String()
		}
		start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
}
