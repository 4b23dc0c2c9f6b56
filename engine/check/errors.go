package check

import "errors"

// The checker's errors; a problem found in a data dir is not one of them
// but a Problem in the Report.
var (
	// ErrNotDataDir is returned by Dir for a directory that is not an
	// engine data dir (missing, not a directory, or without the LOCK file and
	// wal/ directory every data dir has).
	ErrNotDataDir = errors.New("check: not a data directory")

	// ErrReadOnly is returned by every write through Dir's read-only view
	// of a data dir. Seen in a report, it means Dir (or recovery under it)
	// tried to change the dir and was stopped.
	ErrReadOnly = errors.New("check: read-only view of the data dir")
)
