package engine

import (
	"runtime/debug"
	"sync"
)

// The collector during an open's recovery. Almost everything an open
// allocates it keeps — the chain's file images and items, the replayed
// records, the tree's nodes: at 1 M receipts 322 MB allocated for a heap of
// 299 MB after it. Collecting while the heap only grows frees next to
// nothing, yet at the default GOGC the growing heap was marked each time
// it doubled (four or five cycles at 1 M), and the marking cost more than
// its own CPU: its scans took a fifth of the open's page faults, and it ran
// as assists inside the allocations of the parts' images. So the recovery
// runs with collection off when Options.CollectorOffAtOpen asks (the
// setting is the process's, so the process owner's call), and the caller's GC percent is put back after;
// the first cycle then runs on the recovered heap, as it would have soon
// anyway. The heap grows meanwhile only by the open's garbage — the
// batches, scratch and slices it regrows, 11 % of the heap at 1 M — so the
// store's own size bounds it, and a memory limit (GOMEMLIMIT) the process
// sets still starts a cycle when it is reached. One kind of garbage grows
// with the log instead: arena chunks (replay.go) whose every record a
// later entry overwrote. Recovery bounds the log an open replays to about
// two checkpoint intervals, but a store run without checkpoints
// (CheckpointLogBytes -1) replays all of it, so past gcPauseLogBytes of
// log the collector is put back on for the rest of the replay.
//
// GOGC is the process's: opens at once share one change, the last to
// finish putting back what the first found; collection already off is
// left alone.

// gcPauseLogBytes is how much log a replay reads with the collector off:
// four default checkpoint intervals, more than a bounded replay reads.
const gcPauseLogBytes = 4 * defaultCheckpointLogBytes

var openGC struct {
	mu    sync.Mutex
	opens int  // recoveries running
	off   bool // the first turned collection off; saved is what it found
	saved int
}

// pauseGCForOpen turns collection off for a recovery; the function it
// returns puts the GC percent back (once, however often it is called) and
// must be called when the recovery ends, if not before.
func pauseGCForOpen() (resume func()) {
	openGC.mu.Lock()
	defer openGC.mu.Unlock()
	openGC.opens++
	if openGC.opens == 1 {
		openGC.saved = debug.SetGCPercent(-1)
		openGC.off = openGC.saved >= 0
	}
	return sync.OnceFunc(func() {
		openGC.mu.Lock()
		defer openGC.mu.Unlock()
		openGC.opens--
		if openGC.opens == 0 && openGC.off {
			debug.SetGCPercent(openGC.saved)
			openGC.off = false
		}
	})
}

// recoverAtOpen runs db's recovery, with collection paused if the
// options ask for it.
func recoverAtOpen(db *DB) error {
	if !db.opts.CollectorOffAtOpen {
		return (&recoverer{db: db}).recover()
	}
	resume := pauseGCForOpen()
	defer resume()
	return (&recoverer{db: db, resumeGC: resume}).recover()
}
