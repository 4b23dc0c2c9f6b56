package receipt

import "sync"

// retention is what happens to a receipt once it is settled: the release
// of its retained decision (release.go), the cleaner's passes over exp/v1
// (clean.go), which fold settled entries into chunks (expfold.go), clean
// due chunks (chunkclean.go), leave tombstones (tombstone.go) and remove
// the tombstones whose protection ended (tombclean.go).
type retention struct {
	core *core
	sess *sessions // an ended session's steps go with its record

	// cleanMu serialises this process's cleaner passes (CleanOnce, the
	// loop's ticks): each renews the job lease, which would fence the
	// other's writes, and two folds would race for the same entries.
	cleanMu sync.Mutex

	releaseMu sync.Mutex
	releaseQ  []string
	decCursor []byte // maintenance scan position in txn/v1/dec (under releaseMu)
}
