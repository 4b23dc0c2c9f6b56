package engine

import "time"

// OpenPhases is how long each step of an open took: the log's open (its
// tail read and repaired), the checkpoint chain's load (listing, reading,
// decoding and merging its files) and the replay of the log after it. An
// operator reads them in idemd's "recovered" line; the crash-loop bench
// reads them to tell a restart's fixed part from the part that follows
// the store's size.
type OpenPhases struct {
	LogOpen, ChainLoad, Replay time.Duration
}

// openPhases times an open's steps in turn.
type openPhases struct {
	OpenPhases
	last time.Time
}

// mark sets *phase to the time since the previous mark, or since last
// was set.
func (p *openPhases) mark(phase *time.Duration) {
	now := time.Now()
	*phase = now.Sub(p.last)
	p.last = now
}
