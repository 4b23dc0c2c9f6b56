package engine

import "github.com/idemdb/idem/wal"

// CrashForTesting simulates a power loss: writes stop as if the process died,
// unsynced log bytes are handled by tear (nil drops them all), and the data
// dir is released so that Open can recover it in the same process. The DB is
// unusable afterwards. Crash tests and the harness use it; production code
// never calls it.
func (db *DB) CrashForTesting(tear wal.Tear) error {
	if db.closed.Swap(true) {
		return ErrClosed
	}
	close(db.ckptStop)
	<-db.ckptDone
	err := db.log.Crash(tear)
	if cerr := db.lock.Close(); err == nil {
		err = cerr
	}
	return err
}
