package testsupport

import (
	"os"
	"testing"
)

// OnReferenceStore reports whether the tests of this run go on the
// reference store (store/memstore) instead of engine.DB:
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
