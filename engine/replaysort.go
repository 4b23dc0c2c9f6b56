package engine

// The replay's batch sort by the keys' heads: a most-significant-byte
// radix sort, stable, over the head's 24 bytes.
//
// A comparison sort of a full batch (64 Ki ops) took a third of the
// replay reader's CPU — 16 levels of partitioning, each comparison three
// words — and the reader is the replay's slower half (replaypipe.go). The
// radix sort reads one byte of each key per level and moves the keys only
// at the levels where they differ: the levels all of a bucket's keys share
// (a namespace's prefix, the leading digits of an expiry's deadline) cost
// one counting pass, and random bytes (receipt ids) split a batch into
// buckets small enough for an insertion sort after two levels.

// radixInsertionMax is the bucket size below which an insertion sort
// beats another counting pass over 256 buckets.
const radixInsertionMax = 32

// sortReplayKeys sorts keys by head, then log order, using scratch (at
// least as long) as the scatter's target. keys arrive in log order, and
// every pass is stable, so keys of equal heads stay in it.
func sortReplayKeys(keys, scratch []replayKey) {
	radixSortFrom(keys, scratch[:len(keys)], 0)
}

// radixSortFrom sorts keys, which share their heads' first depth bytes.
func radixSortFrom(keys, scratch []replayKey, depth int) {
	for ; depth < 8*headWords; depth++ {
		if len(keys) <= radixInsertionMax {
			insertionSortReplayKeys(keys)
			return
		}
		var count [256]int
		for i := range keys {
			count[headByte(&keys[i], depth)]++
		}
		if count[headByte(&keys[0], depth)] == len(keys) {
			continue // every key shares this byte: nothing to move
		}
		var start [256]int
		for b, at := 0, 0; b < 256; b++ {
			start[b], at = at, at+count[b]
		}
		next := start
		for _, k := range keys {
			b := headByte(&k, depth)
			scratch[next[b]] = k
			next[b]++
		}
		copy(keys, scratch)
		for b := range 256 {
			if count[b] > 1 {
				lo := start[b]
				radixSortFrom(keys[lo:lo+count[b]], scratch[lo:lo+count[b]], depth+1)
			}
		}
		return
	}
	// Every head is equal: the keys are in log order, as they came.
}

// headByte is byte depth of k's head, its words read big-endian.
func headByte(k *replayKey, depth int) byte {
	return byte(k.head[depth>>3] >> (56 - 8*(depth&7)))
}

// insertionSortReplayKeys sorts a few keys by head, then log order.
func insertionSortReplayKeys(keys []replayKey) {
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && compareReplayKeys(keys[j], keys[j-1]) < 0; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
}
