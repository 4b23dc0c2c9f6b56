//go:build !idem_selftest

package fault

// Planted is always false outside the self-test build: the planted bug's
// branch is dead code, whatever is armed.
func Planted(string) bool { return false }
