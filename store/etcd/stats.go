package etcdstore

import "sync/atomic"

// Stats counts the store's calls to etcd since it was created: what the
// bench reports as round trips per request, and how often ambiguity was
// met and settled by reading back.
type Stats struct {
	Txns      uint64 // Txn requests sent
	Ranges    uint64 // Range requests sent (Get, Scan, read-backs)
	Ambiguous uint64 // Txns whose answer was ambiguous
	Resolved  uint64 // of those, proven committed by their nonce
	Groups    uint64 // Txns that carried several Applies (group.go)
	Grouped   uint64 // Applies sent in those
	Split     uint64 // groups etcd refused before proposing: their Applies were sent again alone
}

type counters struct {
	txns, ranges, ambiguous, resolved, groups, grouped, split atomic.Uint64
}

// Stats returns the counts so far.
func (s *Store) Stats() Stats {
	return Stats{
		Txns:      s.stats.txns.Load(),
		Ranges:    s.stats.ranges.Load(),
		Ambiguous: s.stats.ambiguous.Load(),
		Resolved:  s.stats.resolved.Load(),
		Groups:    s.stats.groups.Load(),
		Grouped:   s.stats.grouped.Load(),
		Split:     s.stats.split.Load(),
	}
}
