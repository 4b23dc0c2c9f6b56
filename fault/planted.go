package fault

// Planted bugs: deliberate exactly-once violations that the harness's checker
// self-test plants to prove its checks catch what they are meant to catch.
// Production code asks for one only as `if fault.Planted(fault.BugX)`.
//
// Planted is real only in a build with -tags idem_selftest (planted_on.go),
// where a planted bug is armed like a failpoint, by Enable or GO_FAILPOINTS.
// In every other build (planted_off.go) it is the constant false, inlined at
// each call site: the bug's branch is dead code the compiler removes, so no
// default, test or release binary can be made to run it, whatever
// GO_FAILPOINTS says. The names stay here, untagged, so that the call sites
// compile in every build; they are not failpoints and not in Catalog.
const (
	BugReexecuteOnReplay = "bug/receipt-reexecute-on-replay"
	BugConflictAsAbort   = "bug/twopc-conflict-as-abort"
	BugCleanIgnoresDebt  = "bug/receipt-clean-ignores-debt"
)
