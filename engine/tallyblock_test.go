package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// A tally block reads back as the sums it was written from, segment 0 and
// segments past itemStatsSegsMax included, and only a canonical block
// reads: segments strictly increasing, none of zero bytes, nothing after.
func TestTallyBlock_ReadsBackWhatItSumsAndOnlyThat(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t), 71))
	segs := []uint32{0, 1, 2, 9, itemStatsSegsMax - 1, itemStatsSegsMax, 1 << 30, 1<<32 - 1}
	for round := range 200 {
		var want itemTally
		for range rng.IntN(50) {
			key := rng.IntN(100)
			if rng.IntN(2) == 0 {
				ptr := vlogPtr{seg: segs[rng.IntN(len(segs))], off: rng.Uint32(), n: uint32(1 + rng.IntN(1<<20))}
				want.countRecord(key, ptr.encode(nil), true, 1)
			} else {
				want.countRecord(key, make([]byte, rng.IntN(300)), false, 1)
			}
		}
		block := want.appendBlock(nil)
		var got itemTally
		if err := got.addBlock(block); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if !got.equal(&want) {
			t.Fatalf("round %d: read back %d %v, written %d %v", round, got.live, got.segSums(), want.live, want.segSums())
		}
		if (*itemTally)(nil).addBlock(append(bytes.Clone(block), 0)) == nil {
			t.Fatalf("round %d: a block with a trailing byte read", round)
		}
		if len(block) > 1 && (*itemTally)(nil).addBlock(block[:len(block)-1]) == nil {
			t.Fatalf("round %d: a block cut short read", round)
		}
	}
	for _, bad := range [][]uint64{
		{10, 2, 5, 1, 4, 1}, // segments out of order
		{10, 2, 4, 1, 4, 1}, // a segment twice
		{10, 1, 4, 0},       // a segment of zero bytes
		{10, 1, 1 << 32, 1}, // past the segments' numbers
		{10, 3, 4, 1},       // fewer segments than it says
	} {
		var b []byte
		for _, v := range bad {
			b = binary.AppendUvarint(b, v)
		}
		if (*itemTally)(nil).addBlock(b) == nil {
			t.Fatalf("the block %v read", bad)
		}
	}
}

// withTally returns the part image data (of meta m) with block as its
// tally block, or with none and the magic of a part before tally blocks
// (IDEMCKP6) when block is nil, its CRCs made to match.
func withTally(t testing.TB, data []byte, m partMeta, block []byte) ([]byte, partMeta) {
	t.Helper()
	_, at, err := parsePartHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	bodyEnd := len(data) - partTrailerLen - len(m.end)
	n, err := decodeRecords(data[at:bodyEnd], m.count, m.version, m.ptrs, m.packed, func(index.KV, []byte, store.Version, bool) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	body := append(bytes.Clone(data[:at+n]), block...)
	copy(body, partMagic)
	if block == nil {
		copy(body, partMagicV6)
	}
	tr := bytes.Clone(data[bodyEnd:])
	fixed := tr[len(m.end):]
	binary.LittleEndian.PutUint32(fixed[13:], crc32.Checksum(body, castagnoli))
	binary.LittleEndian.PutUint32(fixed[17:], crc32.Update(crc32.Checksum(m.end, castagnoli), castagnoli, fixed[:17]))
	out := append(body, tr...)
	return out, partMetaT(t, out)
}

// decodedSums is what the full decode of the part data (of meta m) sums
// its records to.
func decodedSums(t testing.TB, data []byte, m partMeta) itemTally {
	t.Helper()
	var sum itemTally
	if err := decodePart(data, m, func(k index.KV, v []byte, _ store.Version, indirect bool) {
		sum.countRecord(k.KeyLen(), v, indirect, 1)
	}); err != nil {
		t.Fatal(err)
	}
	return sum
}

// The full decode (idemctl check, a merge's input) proves a part's tally
// block against its records, as it proves their order: an open's load
// takes both on the CRC's word, so a writer that summed wrong is caught
// there. The load reads the block as it stands.
func TestDecodePart_RefusesATallyBlockItsRecordsDoNotSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t), 73))
	for range 100 {
		data, m := randomPart(t, rng, []byte("k/"), nil)
		sum := decodedSums(t, data, m)
		var wrong itemTally
		wrong.merge(&sum)
		if rng.IntN(2) == 0 {
			wrong.live++
		} else {
			wrong.addSeg(uint32(rng.IntN(8)), 1)
		}
		bad, bm := withTally(t, data, m, wrong.appendBlock(nil))
		err := decodePart(bad, bm, func(index.KV, []byte, store.Version, bool) {})
		if err == nil || !strings.Contains(err.Error(), "tally block") {
			t.Fatalf("a tally block of %d %v over records summing to %d %v: %v", wrong.live, wrong.segSums(), sum.live, sum.segSums(), err)
		}
		var loaded itemTally
		if err := loadPartItems(bad, bm, make([]index.KV, bm.count), &loaded); err != nil || !loaded.equal(&wrong) {
			t.Fatalf("the load read %d %v (%v), the block says %d %v", loaded.live, loaded.segSums(), err, wrong.live, wrong.segSums())
		}
	}
}

// A part written before tally blocks (IDEMCKP6) is summed record by
// record as it loads, to what the full decode sums.
func TestLoadPartItems_SumsAPartWithoutATallyBlockRecordByRecord(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t), 79))
	for round := range 100 {
		data, m := randomPart(t, rng, []byte(fmt.Sprintf("k%d/", round)), nil)
		old, om := withTally(t, data, m, nil)
		if om.tallied || !om.packed {
			t.Fatalf("an IDEMCKP6 part read as tallied %v, packed %v", om.tallied, om.packed)
		}
		want := decodedSums(t, old, om)
		var got itemTally
		if err := loadPartItems(old, om, make([]index.KV, om.count), &got); err != nil {
			t.Fatal(err)
		}
		if !got.equal(&want) {
			t.Fatalf("round %d: loaded %d %v, decoded %d %v", round, got.live, got.segSums(), want.live, want.segSums())
		}
	}
}

// An open's sums — the live bytes that pace merges, and the value log's
// live bytes by segment that decide which segments the collector retires
// — are its tree's, whichever way the chain was built: small deltas
// applied to the base one by one, or large ones merged with it in place,
// the parts' sums taken from their tally blocks either way.
func TestOpen_SumsWhatItsTreeHolds(t *testing.T) {
	const baseKeys = 2000
	for _, deltaKeys := range []int{baseKeys / loadInsertRatio / 2, baseKeys / 2} {
		t.Run(fmt.Sprintf("delta-of-%d", deltaKeys), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seedFor(t), uint64(deltaKeys)))
			d := newMemDisk()
			opts := Options{CheckpointLogBytes: -1, ColdValue: func(key, _ []byte) bool { return strings.HasPrefix(string(key), "cold/") }}
			db := d.open(t, opts)
			key := func(i int) string {
				if i%3 == 0 {
					return fmt.Sprintf("hot/%05d", i)
				}
				return fmt.Sprintf("cold/%05d", i)
			}
			for i := range baseKeys {
				putT(t, db, key(i), strings.Repeat("b", 40+rng.IntN(200)))
			}
			if err := db.Checkpoint(); err != nil { // the base
				t.Fatal(err)
			}
			for range deltaKeys {
				if i := rng.IntN(baseKeys + 100); rng.IntN(8) == 0 {
					deleteT(t, db, key(i))
				} else {
					putT(t, db, key(i), strings.Repeat("d", 40+rng.IntN(200)))
				}
			}
			if err := db.Checkpoint(); err != nil { // a delta
				t.Fatal(err)
			}
			for range 50 { // the log's
				putT(t, db, key(rng.IntN(baseKeys)), strings.Repeat("l", 40+rng.IntN(200)))
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = d.open(t, opts)
			defer db.Close()
			db.treeMu.RLock()
			defer db.treeMu.RUnlock()
			var items []index.KV
			db.tree.AscendAll(func(it index.KV) bool { items = append(items, it); return true })
			live, vlive := itemStatsOf(items)
			opened := map[uint32]int64{}
			for seg, n := range db.vlogLive {
				if n != 0 {
					opened[seg] = n
				}
			}
			if len(vlive) == 0 {
				t.Fatal("no value in the value log: the segments' sums went untested")
			}
			if db.liveBytes != live || !maps.Equal(opened, vlive) {
				t.Fatalf("the open summed %d live bytes and %v in the value log, its tree holds %d and %v", db.liveBytes, opened, live, vlive)
			}
		})
	}
}
