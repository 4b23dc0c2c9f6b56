package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// A part's tally block (IDEMCKP7, ckptfile.go): what its records add to
// the store's live bytes and to the value log's by segment, summed by the
// writer as it writes them, so that an open's load need not decode every
// record's value-log pointer for them (partload.go). That decode and its
// sums were 17 % of the CPU of an open of the store a 100-kill crash loop
// left (a chain of 1 180 MB, 22 M records, warm; docs/engine.md, "A part
// carries its tally"). Pebble keeps the like beside each table: the bytes
// it references in each blob file, so that no read of the table is needed
// to know what a blob file still holds.
//
//	uvarint(live) | uvarint(segments) | segments × ( uvarint(segment) | uvarint(bytes) )
//
// The segments strictly increase and none has zero bytes: one tally has
// one block.

// appendBlock appends t as a tally block; t holds a part's records, added
// and never taken back, so no sum is negative.
func (t *itemTally) appendBlock(b []byte) []byte {
	segs := t.segSums()
	b = binary.AppendUvarint(b, uint64(t.live))
	b = binary.AppendUvarint(b, uint64(len(segs)))
	for _, seg := range slices.Sorted(maps.Keys(segs)) {
		b = binary.AppendUvarint(b, uint64(seg))
		b = binary.AppendUvarint(b, uint64(segs[seg]))
	}
	return b
}

// segSums is t's non-zero sums by segment.
func (t *itemTally) segSums() map[uint32]int64 {
	_, segs := tallySums([]itemTally{*t})
	return segs
}

// addBlock adds the tally block b, which it must fill exactly, to t (nil:
// b is only checked).
func (t *itemTally) addBlock(b []byte) error {
	var parsed itemTally
	live, segs, err := blockPair(&b)
	if err != nil {
		return err
	}
	if live>>62 != 0 || segs > uint64(len(b)/2) {
		return fmt.Errorf("tally block: %d live bytes in %d segments", live, segs)
	}
	parsed.live = int64(live)
	prev := int64(-1)
	for range segs {
		seg, n, err := blockPair(&b)
		if err != nil {
			return err
		}
		if int64(seg) <= prev || seg > 1<<32-1 || n == 0 || n>>62 != 0 {
			return fmt.Errorf("tally block: segment %d of %d bytes after %d", seg, n, prev)
		}
		prev = int64(seg)
		parsed.addSeg(uint32(seg), int64(n))
	}
	if len(b) != 0 {
		return fmt.Errorf("tally block: %d trailing bytes", len(b))
	}
	if t != nil {
		t.merge(&parsed)
	}
	return nil
}

// blockPair reads two uvarints from the front of *b and steps past them:
// the block is made of pairs (live bytes and segment count, then segment
// and bytes).
func blockPair(b *[]byte) (uint64, uint64, error) {
	var v [2]uint64
	for i := range v {
		x, n := binary.Uvarint(*b)
		if n <= 0 {
			return 0, 0, errors.New("tally block: a bad varint")
		}
		v[i], *b = x, (*b)[n:]
	}
	return v[0], v[1], nil
}

// merge adds o's sums to t's.
func (t *itemTally) merge(o *itemTally) {
	t.live += o.live
	for seg, n := range o.bySeg {
		if o.seen[seg] {
			t.addSeg(uint32(seg), n)
		}
	}
	for seg, n := range o.vlive {
		t.addSeg(seg, n)
	}
}

// equal reports whether t and o sum to the same.
func (t *itemTally) equal(o *itemTally) bool {
	return t.live == o.live && maps.Equal(t.segSums(), o.segSums())
}
