package table

import (
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/twopc"
)

// NewWithCoordinator returns a table manager on store and the 2PC
// coordinator whose participants are its shards, wired both ways: the
// coordinator rebuilds participants from the refs it recorded, and document
// reads resolve open intents through its decisions. opts.Now is both
// clocks (nil: time.Now).
func NewWithCoordinator(store engine.Store, opts twopc.Options) (*Tables, *twopc.Coordinator) {
	tables := New(store, opts.Now)
	coord := twopc.New(store, func(ref []byte) (twopc.Participant, error) { return tables.Participant(ref) }, opts)
	tables.SetDecisionReader(coord.Committed)
	return tables, coord
}
