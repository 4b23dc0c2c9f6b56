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
//
// One planted bug per property the harness claims to check (see
// PlantedCatalog for where each sits and what it breaks). A bug whose hook
// is not in the production code yet is listed in hooksPending
// (planted_pending_test.go); the harness self-test skips it as "hook
// pending" until the hook is there.
const (
	// Exactly-once answers and effects (the porcupine models).
	BugReexecuteOnReplay = "bug/receipt-reexecute-on-replay"
	BugConflictAsAbort   = "bug/twopc-conflict-as-abort"
	// Fencing: a stale owner's write must fail (the harness's auditor).
	BugTerminalUnfenced = "bug/receipt-terminal-unfenced"
	BugRenewUnfenced    = "bug/lease-renew-unfenced"
	BugAdoptKeepsEpoch  = "bug/lease-adopt-keeps-epoch"
	BugCleanUnfenced    = "bug/receipt-clean-unfenced"
	// Debt pins a receipt against the cleaner.
	BugCleanIgnoresDebt           = "bug/receipt-clean-ignores-debt"
	BugCleanIgnoresVisibilityDebt = "bug/receipt-clean-ignores-visibility-debt"
	// An expired key never executes again.
	BugCleanDropsTombstone = "bug/receipt-clean-drops-tombstone"
	BugExpiredReexecutes   = "bug/receipt-expired-reexecutes"
	// The request fingerprint tells apart batches that differ in one field.
	BugFingerprintIgnoresDeletes = "bug/receipt-fingerprint-ignores-deletes"
	BugCanonDropsUpsert          = "bug/table-canon-drops-upsert"
	// A damaged checkpoint is never loaded.
	BugCkptIgnoresCRC = "bug/engine-ckpt-ignores-crc"
	// A damaged value-log record is never served.
	BugVlogIgnoresCRC = "bug/engine-vlog-ignores-crc"
	// A verbatim replay is of the same bytes only.
	BugVerbatimIgnoresDigest = "bug/receipt-verbatim-ignores-digest"
	// A session's commit is conditioned on the versions the session saw.
	BugSessionCommitUnconditioned = "bug/receipt-session-commit-unconditioned"
	// The etcd store keeps the contract: every condition is compared, and
	// an ambiguous Txn is settled by its own write alone.
	BugEtcdLeaseCondsDropped = "bug/etcdstore-lease-conds-dropped"
	BugEtcdSettleAnyValue    = "bug/etcdstore-settle-any-value"
	// Forwarding: one hop at most, and only to the incarnation that holds.
	BugForwardForwarded = "bug/api-forward-forwarded"
	BugLocateNodeOnly   = "bug/receipt-locate-node-only"
	// Reads never see uncommitted intents.
	BugReadServesIntent = "bug/table-read-serves-intent"
)
