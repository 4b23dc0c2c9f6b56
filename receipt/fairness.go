package receipt

import (
	"hash/fnv"
	"time"
)

// Maintenance on every node adopts the receipts of nodes that died, and
// the nodes share that work rather than race for it: for each receipt the
// registered nodes other than its dead owner are ranked by rendezvous
// hashing on (receipt, node), and the node of rank k adopts it only once
// k × Options.AdoptStagger has passed since the lease expired. The
// receipts of a dead node so split about evenly among the nodes alive
// (each is rank 0 for its share), and none is left behind by a dead or
// slow node of a better rank: the next one takes it a stagger later. A
// foreground request never waits for its rank: the node a client asked
// adopts at once. Nothing here is needed for safety — adoption is one
// CAS, whoever makes it — only for fairness.

// adoptRanksMax caps the rank that delays adoption, so that nodes which
// registered once and are gone for good add at most this many staggers.
const adoptRanksMax = 3

// nodesScanMax bounds the node records one maintenance pass reads to rank
// itself among them.
const nodesScanMax = 256

// adoptRank is me's rank for receipt id among nodes, less dead (the
// claim's owner): how many of the others hash higher. A node missing from
// nodes (it registered after the scan) ranks among them all the same.
func adoptRank(id, me, dead string, nodes []string) int {
	mine := rendezvous(id, me)
	rank := 0
	for _, n := range nodes {
		if n != me && n != dead && rendezvous(id, n) > mine {
			rank++
		}
	}
	return min(rank, adoptRanksMax)
}

func rendezvous(id, node string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(node))
	return h.Sum64()
}

// adoptDelay is how long after the lease's expiry maintenance on this
// node adopts receipt id of the dead owner.
func (r *recovery) adoptDelay(id, dead string, nodes []string) time.Duration {
	return time.Duration(adoptRank(id, r.core.owner.Node, dead, nodes)) * r.core.opts.AdoptStagger
}
