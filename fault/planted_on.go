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
	{BugTerminalUnfenced, "bug", "flow.fencedTerminal (receipt/decide.go), after the claim fence is added", "planted bug: the terminal write (and a decision published with it) carries no claim fence: a stale owner's lands"},
	{BugRenewUnfenced, "bug", "Heartbeat.Renew, before each renewal Apply", "planted bug: a renewal carries no claim fence: a stale owner extends a lease it lost"},
	{BugAdoptKeepsEpoch, "bug", "lease.ClaimAdopt", "planted bug: an adoption keeps the predecessor's epoch"},
	{BugCleanUnfenced, "bug", "retention.deleteVictims (receipt/clean.go), the cleanup batch", "planted bug: a cleanup batch carries no job-lease fence: a stale cleaner's delete lands"},
	{BugCleanIgnoresDebt, "bug", "retention.cleanableAt (receipt/clean.go)", "planted bug: the cleaner deletes receipts with debt"},
	{BugCleanIgnoresVisibilityDebt, "bug", "retention.cleanableAt (receipt/clean.go), terminal receipts", "planted bug: the cleaner deletes terminal receipts with visibility debt"},
	{BugCleanDropsTombstone, "bug", "retention.cleanableAt (receipt/clean.go), terminal receipts", "planted bug: the cleaner deletes a protected receipt without leaving its tombstone"},
	{BugExpiredReexecutes, "bug", "Service.Execute, the expired branch", "planted bug: an expired key's batch runs again (fast path) though the answer refuses it"},
	{BugFingerprintIgnoresDeletes, "bug", "receipt.Canonical, the fingerprint", "planted bug: the request fingerprint leaves out the deletes: another batch replays the first's answer"},
	{BugCanonDropsUpsert, "bug", "table: the canonical batch", "planted bug: the canonical batch drops upsert: another batch replays the first's answer"},
	{BugCkptIgnoresCRC, "bug", "engine.decodePart, the checksum check", "planted bug: a checkpoint part is loaded without checking its CRC"},
	{BugVlogIgnoresCRC, "bug", "engine.parseVlogRecord (engine/vlog.go), the checksum check", "planted bug: a value-log record is read without checking its CRC: a flipped byte is served as the value"},
	{BugVerbatimIgnoresDigest, "bug", "Service.ReplayVerbatim (receipt/verbatim.go), the digest check", "planted bug: a retry replays verbatim whatever bytes it sends: another batch replays the first's answer"},
	{BugSessionCommitUnconditioned, "bug", "Service.planSession (receipt/session_commit.go), before the plan", "planted bug: a session's commit holds the documents it writes to no version (all blind): a write made since the session read them is overwritten, a lost update"},
	{BugEtcdLeaseCondsDropped, "bug", "etcdstore.Store.txn (store/etcd/apply.go), the compares", "planted bug: at-version conditions on lease/ keys are left out of the Txn: a zombie owner's fenced write lands on etcd"},
	{BugEtcdSettleAnyValue, "bug", "etcdstore.Store.settle (store/etcd/resolve.go), the read-back", "planted bug: an ambiguous Txn's read-back takes any value at the probe key as its own: a write that did not commit is answered committed"},
	{BugForwardForwarded, "bug", "api.Server.mayForward (api/forward.go)", "planted bug: a request another node forwarded (signed) may be forwarded again: nodes that disagree on the owner forward in a loop"},
	{BugLocateNodeOnly, "bug", "receipt.Service.Locate (receipt/service.go), the owner check", "planted bug: Locate compares the node only, not the incarnation: a request is forwarded to a restarted node that does not hold the claim"},
	{BugReadServesIntent, "bug", "table.Tables.Get (table/read.go), an intent on the document", "planted bug: an intent of an undecided (or aborted) transaction is served as the document: a read sees an uncommitted write"},
}

// plantedArmable lists the planted bugs GO_FAILPOINTS may name (CheckEnv):
// in this build, every one.
func plantedArmable() []string {
	out := make([]string, 0, len(PlantedCatalog))
	for _, p := range PlantedCatalog {
		out = append(out, p.Name)
	}
	return out
}
