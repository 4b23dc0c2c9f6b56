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

	CkptWriteBefore   = "engine/ckpt-write-before"
	CkptSyncBefore    = "engine/ckpt-sync-before"
	CkptRenameBefore  = "engine/ckpt-rename-before"
	CkptDirSyncBefore = "engine/ckpt-dirsync-before"
)

// Point documents one failpoint.
type Point struct {
	Name      string
	Layer     string // package the failpoint lives in
	Where     string
	Simulates string
}

// Catalog lists every failpoint.
var Catalog = []Point{
	{WALWriteBefore, "wal", "Log.writeGroup, before the group's WriteBatch", "write error with nothing written: the group's callers get ErrAmbiguous, the log fail-stops"},
	{WALWriteAfter, "wal", "Log.writeGroup, after WriteBatch, before the fsync", "crash or error with the group in the page cache only"},
	{WALSyncBefore, "wal", "Log.writeGroup, before the fsync", "fsync failure: the log fail-stops, the group's callers get ErrAmbiguous"},
	{WALSyncAfter, "wal", "Log.writeGroup, after the fsync, before callers are released", "crash after durability but before anyone was told"},
	{WALDirSyncBefore, "wal", "Log.writeGroup, before fsyncing the directory after tidwall created a segment", "crash with a new segment's directory entry not yet durable"},
	{WALTruncateBefore, "wal", "Log.TruncateFront, before removing each old segment", "crash part-way through front truncation"},
	{WALTruncateAfter, "wal", "Log.TruncateFront, after removing segments, before the directory fsync", "crash with removals not yet durable"},

	{CkptWriteBefore, "engine", "DB.writeCheckpoint, before creating the temp file", "checkpoint I/O failure: the WAL is kept, nothing lost"},
	{CkptSyncBefore, "engine", "DB.writeCheckpoint, after writing the temp file, before its fsync", "crash with a half-durable temp checkpoint"},
	{CkptRenameBefore, "engine", "DB.writeCheckpoint, before renaming temp to final", "crash with a complete temp file never published"},
	{CkptDirSyncBefore, "engine", "DB.writeCheckpoint, after the rename, before the directory fsync", "crash with the rename not yet durable"},
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
