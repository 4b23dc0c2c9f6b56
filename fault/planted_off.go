//go:build !idem_selftest

package fault

// Planted is always false outside the self-test build: the planted bug's
// branch is dead code, whatever is armed.
func Planted(string) bool { return false }

// plantedArmable is empty outside the self-test build: arming a planted
// bug there does nothing, so GO_FAILPOINTS naming one is a mistake
// (CheckEnv).
func plantedArmable() []string { return nil }
