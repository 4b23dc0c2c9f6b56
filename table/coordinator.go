package table

import (
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/twopc"
)

// NewWithCoordinator returns a table manager on store and the 2PC
// coordinator whose participants are its shards, wired both ways: the
// coordinator rebuilds participants from the refs it recorded, and document
// reads resolve open intents through its decisions. opts.Now is both
// clocks (nil: time.Now).
func NewWithCoordinator(st store.Store, opts twopc.Options) (*Tables, *twopc.Coordinator) {
	tables := New(st, opts.Now)
	coord := twopc.New(st, func(ref []byte) (twopc.Participant, error) { return tables.Participant(ref) }, opts)
	tables.SetDecisionReader(coord.Committed)
	return tables, coord
}
