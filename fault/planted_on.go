//go:build idem_selftest

package fault

// Planted reports whether the named planted bug is armed (by Enable, as the
// harness self-test does, or by GO_FAILPOINTS). It exists only in the
// self-test build; elsewhere Planted is the constant false.
func Planted(name string) bool {
	_, ok := Eval(name)
	return ok
}

// PlantedCatalog documents every planted bug, as Catalog documents every
// failpoint (TestSelfTest_PlantedCatalog keeps it and planted.go in step).
var PlantedCatalog = []Point{
	{BugReexecuteOnReplay, "bug", "Service.Execute, replay branch", "planted bug: a replay executes the batch again (fast path)"},
	{BugConflictAsAbort, "bug", "Coordinator.DecideOrLearn, on ErrDecisionConflict", "planted bug: a decision conflict is taken as proof of abort"},
	{BugCleanIgnoresDebt, "bug", "Service.cleanable", "planted bug: the cleaner deletes receipts with debt"},
}
