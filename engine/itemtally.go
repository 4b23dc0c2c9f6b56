package engine

import "github.com/idemdb/idem/index"

// itemTally sums the live bytes of items and the value log's live bytes
// by segment as they go by. The chain's merges tally each record as they
// write it, its key and value just read for the comparison, instead of a
// pass over the merged items afterwards (itemStats), which read every
// record's value once more from the file images, cold: 0.06 s of an open
// at 2 M receipts (docs/engine.md, "Restart of a growing store"). A
// part's writer tallies its records too and writes the sums after them
// (tallyblock.go), so that an open adds a part's block instead of its
// records, and tallies record by record only the deltas' records and the
// base's they hide.
//
// It sums by segment in a slice, not a map (relive): a store's segments
// are numbered from 1 and few, and a map update per record in the value
// log was a third of the pass.
type itemTally struct {
	live  int64
	bySeg []int64
	seen  []bool
	vlive map[uint32]int64 // segments from itemStatsSegsMax on
}

func (t *itemTally) add(it index.KV) { t.count(it, 1) }

// addIf is add on a tally that may be nil (none kept).
func (t *itemTally) addIf(it index.KV) {
	if t != nil {
		t.count(it, 1)
	}
}

// sub takes back an item added before (a merge's decoded base, tallied
// whole, passing over a record a delta hides).
func (t *itemTally) sub(it index.KV) { t.count(it, -1) }

func (t *itemTally) count(it index.KV, sign int64) {
	t.countRecord(it.KeyLen(), it.Value(), it.Indirect(), sign)
}

// countRecord counts the record of a key of keyLen bytes whose value, or
// with indirect value-log pointer, is val.
func (t *itemTally) countRecord(keyLen int, val []byte, indirect bool, sign int64) {
	t.live += sign * recordBytes(keyLen, len(val))
	if !indirect {
		return
	}
	if ptr, err := decodeVlogPtr(val); err == nil {
		t.addSeg(ptr.seg, sign*int64(ptr.n))
	}
}

// addSeg adds n bytes to segment seg's.
func (t *itemTally) addSeg(seg uint32, n int64) {
	if seg >= itemStatsSegsMax {
		if t.vlive == nil {
			t.vlive = map[uint32]int64{}
		}
		t.vlive[seg] += n
		return
	}
	for int(seg) >= len(t.bySeg) {
		t.bySeg, t.seen = append(t.bySeg, 0), append(t.seen, false)
	}
	t.bySeg[seg] += n
	t.seen[seg] = true
}

// sums adds the tally to live and vlive.
func (t *itemTally) sums(live *int64, vlive map[uint32]int64) {
	*live += t.live
	for seg, n := range t.bySeg {
		if t.seen[seg] && n != 0 { // 0: every record added was taken back
			vlive[uint32(seg)] += n
		}
	}
	for seg, n := range t.vlive {
		if n != 0 {
			vlive[seg] += n
		}
	}
}

// tallySums is the sums of tallies.
func tallySums(tallies []itemTally) (int64, map[uint32]int64) {
	var live int64
	vlive := map[uint32]int64{}
	for i := range tallies {
		tallies[i].sums(&live, vlive)
	}
	return live, vlive
}
