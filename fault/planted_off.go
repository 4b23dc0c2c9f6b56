//go:build !idem_selftest

package fault

// PlantedCompiled reports whether planted bugs are compiled in (true only
// under -tags idem_selftest).
const PlantedCompiled = false

// Planted is always false outside the self-test build: the planted bug's
// branch is dead code, whatever is armed.
func Planted(string) bool { return false }
