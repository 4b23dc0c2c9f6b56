package fault

// Every failpoint in the project is named here, with where it sits and what
// arming it simulates. Code refers to the constants, never to literals;
// TestCatalog_NamesAreUsedAndUnique keeps this list and the code in step.
const (
	WALWriteBefore    = "wal/write-before"
	WALWriteAfter     = "wal/write-after"
	WALSyncBefore     = "wal/sync-before"
	WALSyncAfter      = "wal/sync-after"
	WALDirSyncBefore  = "wal/dirsync-before"
	WALTruncateBefore = "wal/truncate-before"
	WALTruncateAfter  = "wal/truncate-after"

	WALSpareWriteBefore = "wal/spare-write-before"
	WALSpareSyncBefore  = "wal/spare-sync-before"
	WALSpareTakeBefore  = "wal/spare-take-before"

	CkptWriteBefore   = "engine/ckpt-write-before"
	CkptSyncBefore    = "engine/ckpt-sync-before"
	CkptRenameBefore  = "engine/ckpt-rename-before"
	CkptDirSyncBefore = "engine/ckpt-dirsync-before"

	CkptMergeLinkBefore     = "engine/ckpt-merge-link-before"
	CkptMergeTruncateBefore = "engine/ckpt-merge-truncate-before"

	VlogWriteBefore = "engine/vlog-write-before"
	VlogSyncBefore  = "engine/vlog-sync-before"
	VlogGCBefore    = "engine/vlog-gc-before"

	TwoPCBeginBefore   = "twopc/begin-before"
	TwoPCBeginAfter    = "twopc/begin-after"
	TwoPCDecideBefore  = "twopc/decide-before"
	TwoPCDecideAfter   = "twopc/decide-after"
	TwoPCResolveBefore = "twopc/resolve-before"
	TwoPCResolveAfter  = "twopc/resolve-after"
	TwoPCReleaseBefore = "twopc/release-before"
	TwoPCReleaseAfter  = "twopc/release-after"
	TwoPCChainBefore   = "twopc/chain-before"
	TwoPCChainAfter    = "twopc/chain-after"

	LeaseRenewBefore = "lease/renew-before"

	ReceiptCreateBefore   = "receipt/create-before"
	ReceiptAdoptBefore    = "receipt/adopt-before"
	ReceiptDecideBefore   = "receipt/decide-before"
	ReceiptTerminalBefore = "receipt/terminal-before"
	ReceiptReleaseBefore  = "receipt/release-before"
	ReceiptCleanBefore    = "receipt/clean-before"
	TombCleanBefore       = "receipt/tomb-clean-before"
	ExpiryFoldBefore      = "receipt/expiry-fold-before"
	ChunkCleanBefore      = "receipt/chunk-clean-before"
	ReceiptMaintainBefore = "receipt/maintain-before"

	SessionBeginBefore = "session/begin-before"
	SessionStageBefore = "session/stage-before"
	SessionEndBefore   = "session/end-before"
)

// Point documents one failpoint.
type Point struct {
	Name      string
	Layer     string // package the failpoint lives in
	Where     string
	Simulates string
}

// Catalog lists every failpoint. The planted bugs are not failpoints: see
// planted.go (and PlantedCatalog, in the idem_selftest build only).
var Catalog = []Point{
	{WALWriteBefore, "wal", "Log.writeGroup, before the group's WriteBatch", "write error with nothing written: the group's callers get ErrAmbiguous, the log fail-stops"},
	{WALWriteAfter, "wal", "Log.writeGroup, after WriteBatch, before the fsync", "crash or error with the group in the page cache only"},
	{WALSyncBefore, "wal", "Log.writeGroup, before the fsync", "fsync failure: the log fail-stops, the group's callers get ErrAmbiguous"},
	{WALSyncAfter, "wal", "Log.writeGroup, after the fsync, before callers are released", "crash after durability but before anyone was told"},
	{WALDirSyncBefore, "wal", "Log.writeGroup, before fsyncing the directory after tidwall created a segment", "crash with a new segment's directory entry not yet durable (a crash loses the segment)"},
	{WALTruncateBefore, "wal", "Log.TruncateFront, before removing each old segment", "crash part-way through front truncation"},
	{WALSpareWriteBefore, "wal", "preallocator.writeSpare, before creating SPARE.partial", "a spare that cannot be made: the next segment is an ordinary file"},
	{WALSpareSyncBefore, "wal", "preallocator.writeSpare, after writing the zeros, before the fsync", "crash or error with a spare's zeros in the page cache only"},
	{WALSpareTakeBefore, "wal", "preallocator.takeSpare, before renaming SPARE to the new segment", "a spare that cannot be taken: the segment is created as an ordinary file"},
	{WALTruncateAfter, "wal", "Log.TruncateFront, after removing segments, before the directory fsync", "crash with removals not yet durable (a crash brings the segments back)"},

	{CkptWriteBefore, "engine", "DB.writePart, before creating each part's temp file", "checkpoint I/O failure: the WAL is kept, nothing lost; the parts written so far are resumed"},
	{CkptSyncBefore, "engine", "DB.writePart, after writing a part's temp file, before its fsync", "crash with a half-durable temp part"},
	{CkptRenameBefore, "engine", "DB.writePart, before renaming a part's temp file to its name", "crash with a complete temp part never published"},
	{CkptDirSyncBefore, "engine", "DB.writePart, after a part's rename, before the directory fsync", "crash with the rename not yet durable (a crash undoes it)"},
	{CkptMergeLinkBefore, "engine", "DB.linkMerge, after a merged base's last part is durable, before it becomes the chain's base", "crash with a complete merged base on disk that no process linked: the next open loads it, with the deltas after it"},
	{CkptMergeTruncateBefore, "engine", "DB.linkMerge, after the merged base is linked, before the log is truncated and the older chain removed", "crash or I/O failure with the log and the chain before the old one still on disk: the next merge removes them"},
	{VlogWriteBefore, "engine", "valueLog.flush, before writing buffered records to the active segment", "value-log I/O failure or crash mid-checkpoint: no pointer to the records exists yet; the checkpoint fails and the log is kept"},
	{VlogSyncBefore, "engine", "valueLog.sync, before each segment's fsync; valueLog.syncSegment, before the fsync of a segment an interrupted checkpoint spilled to, whose records the next life adopts", "crash with value-log records written but not durable, before any pointer to them is"},
	{VlogGCBefore, "engine", "DB.collectValueLog, before the moved values' pointers replace the old ones", "crash after relocated values are durable, before the tree points at them: the old segment is still in use"},

	{TwoPCBeginBefore, "twopc", "Coordinator.Begin, before the atomic record+prepares Apply", "crash before the transaction exists: nothing durable"},
	{TwoPCBeginAfter, "twopc", "Coordinator.Begin, after record and every prepare are durable", "crash with intents prepared and no decision: recovery decides"},
	{TwoPCDecideBefore, "twopc", "Coordinator.Decide, before the create-if-absent decision Apply", "crash between prepare and decision"},
	{TwoPCDecideAfter, "twopc", "Coordinator.Decide, after the decision (and inline resolution) is durable", "crash after the decision, before the caller learns it"},
	{TwoPCResolveBefore, "twopc", "Coordinator.Resolve, before each participant's resolution Apply", "crash with some participants unresolved (visibility debt)"},
	{TwoPCResolveAfter, "twopc", "Coordinator.Resolve, after each participant's resolution is durable", "crash part-way through resolution"},
	{TwoPCReleaseBefore, "twopc", "Coordinator.Release, before deleting the retained decision", "crash before release: the decision stays retained"},
	{TwoPCReleaseAfter, "twopc", "Coordinator.Release, after the decision is deleted", "crash right after release"},
	{TwoPCChainBefore, "twopc", "Coordinator.BeginCommit, before the chained begin+decide write", "crash before the transaction exists: nothing durable"},
	{TwoPCChainAfter, "twopc", "Coordinator.BeginCommit, after prepares and decision are durable (one fsync)", "crash after the commit, before the caller learns it"},

	{LeaseRenewBefore, "lease", "Heartbeat.Renew, before each renewal Apply", "transient lease-store failure: retried while the confirmed lease is valid"},

	{ReceiptCreateBefore, "receipt", "flow.create* (receipt/create.go), before the write that publishes a new receipt", "crash before the receipt exists: the request left no trace"},
	{ReceiptAdoptBefore, "receipt", "flow.adopt (receipt/adopt.go), before the lease CAS", "crash of a successor just before it adopts"},
	{ReceiptDecideBefore, "receipt", "flow.decide (receipt/decide.go), after Begin (receipt started, intents prepared), before the decision", "owner dies after execution started: a successor must finish without a client retry"},
	{ReceiptTerminalBefore, "receipt", "flow.publish (receipt/decide.go), before publishing an already decided outcome", "terminal publication fails: recovery publishes the exact envelope later"},
	{ReceiptReleaseBefore, "receipt", "retention.releaseBatch (receipt/release.go), before releasing retained decisions", "crash before release: decisions stay retained, nothing lost"},
	{ReceiptCleanBefore, "receipt", "retention.deleteVictims (receipt/clean.go), before each cleanup Apply", "crash of the cleaner mid-pass"},
	{TombCleanBefore, "receipt", "retention.cleanTombs (receipt/tombclean.go), before each Apply that deletes tombstones whose protection ended", "crash of the tombstone cleaner mid-chunk: the chunk stays and is walked again"},
	{ExpiryFoldBefore, "receipt", "retention.foldChunk (receipt/expfold.go), before the Apply that writes a chunk of expiry entries and deletes them", "crash of the cleaner mid-fold: the entries stay, or the chunk has them, never neither"},
	{ChunkCleanBefore, "receipt", "retention.cleanChunk (receipt/chunkclean.go), before the Apply that rewrites or deletes a receipt chunk after its due receipts were cleaned", "crash between the cleanup and the chunk: the chunk is walked again, its cleaned receipts strays"},
	{ReceiptMaintainBefore, "receipt", "Service.MaintainOnce, at the start of a recovery pass", "a blocked or failing recovery pass (renewal must not depend on it)"},
	{SessionBeginBefore, "receipt", "sessions.beginSession (receipt/session_begin.go), before the write that publishes a new session", "crash before the session exists: begin left no trace"},
	{SessionStageBefore, "receipt", "sessions.writeSession (receipt/session_stage.go), before a staged batch or a first read is made durable", "owner dies mid-session: the session is presumed aborted once its lease expires"},
	{SessionEndBefore, "receipt", "sessions.endSession (receipt/session_end.go), before an abort, an expiry or a presumed abort is written", "crash while ending a session: maintenance ends it again"},
}

// Names returns the names of every cataloged failpoint in the given layer
// ("" for all).
func Names(layer string) []string {
	var out []string
	for _, p := range Catalog {
		if layer == "" || p.Layer == layer {
			out = append(out, p.Name)
		}
	}
	return out
}
