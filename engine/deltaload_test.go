package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// randomDelta writes a delta of random puts — inline values and both
// pointer forms — and tombstones, over raw and packed keys.
func randomDelta(t *testing.T, rng *rand.Rand) ([]byte, deltaMeta) {
	keys := map[string]bool{}
	for range rng.IntN(300) {
		k := fmt.Sprintf("k/%0*d", 1+rng.IntN(90), rng.IntN(1e6))
		if rng.IntN(3) == 0 {
			k = fmt.Sprintf("k/%x/%032x", rng.IntN(1e6), rng.Uint64())
		}
		keys[k] = true
	}
	v := store.Version(2 + rng.Uint64N(1<<40))
	var buf bytes.Buffer
	w := newDeltaWriter(&buf, v, 1, 1)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range keys {
			if !yield(k) {
				return
			}
		}
	}) {
		ver := store.Version(1 + rng.Uint64N(uint64(v)))
		switch rng.IntN(4) {
		case 0:
			w.tombstone([]byte(k))
		case 1:
			w.put(index.Probe([]byte(k)), bytes.Repeat([]byte{byte(rng.IntN(256))}, rng.IntN(300)), ver, false)
		case 2:
			w.put(index.Probe([]byte(k)), vlogPtr{seg: rng.Uint32N(1 << 22), off: rng.Uint32(), n: rng.Uint32N(1 << 20)}.encode(nil), ver, true)
		default:
			w.put(index.Probe([]byte(k)), vlogPtr{seg: rng.Uint32(), off: rng.Uint32(), n: rng.Uint32()}.encode(nil), ver, true)
		}
	}
	if err := w.finish(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	m, err := deltaMetaOf(data[:deltaHeaderLen], data[len(data)-deltaTrailerLen:], int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return data, m
}

// A delta's load takes its order on the CRC's word; what it makes must be
// what the full decode makes: the same items and tombstones.
func TestLoadDeltaRecords_EqualsTheFullDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t), 47))
	for range 200 {
		data, m := randomDelta(t, rng)
		var want loadRun
		err := decodeDelta(data, m, func(k index.KV, v []byte, ver store.Version, tombstone, indirect bool) {
			if tombstone {
				want.add(k, true)
				return
			}
			want.add(loadedKV(k, v, ver, indirect), false)
		})
		if err != nil {
			t.Fatal(err)
		}
		var got loadRun
		if err := loadDeltaRecords(data, m, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.kv) != len(want.kv) {
			t.Fatalf("%d records, the decode %d", len(got.kv), len(want.kv))
		}
		for i := range got.kv {
			if got.kv[i] != want.kv[i] || got.tombstone(i) != want.tombstone(i) {
				t.Fatalf("record %d: %q tombstone %v, the decode %q tombstone %v", i, got.kv[i].Key(), got.tombstone(i), want.kv[i].Key(), want.tombstone(i))
			}
		}
	}
}

// A delta damaged under a matching CRC is refused, or loads records that
// all lie inside its image, tombstones included.
func TestLoadDeltaRecords_DamageUnderAMatchingCRCStaysInsideTheImage(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t), 53))
	loaded := 0
	for range 2000 {
		data, m := randomDelta(t, rng)
		recsEnd := len(data) - deltaTrailerLen
		if recsEnd == deltaHeaderLen {
			continue
		}
		for range 1 + rng.IntN(4) {
			data[deltaHeaderLen+rng.IntN(recsEnd-deltaHeaderLen)] ^= byte(1 + rng.IntN(255))
		}
		sumEnd := recsEnd + 8
		binary.LittleEndian.PutUint32(data[sumEnd:], crc32.Checksum(data[:sumEnd], castagnoli))
		var run loadRun
		if loadDeltaRecords(data, m, &run) != nil {
			continue
		}
		for i, kv := range run.kv {
			if !insideImage(data, kv, run.tombstone(i)) {
				t.Fatalf("record %d lies outside the image", i)
			}
		}
		loaded++
	}
	if loaded < 100 {
		t.Fatalf("only %d of 2000 damaged deltas loaded: the bounds went untested", loaded)
	}
}

// The delta writer refuses keys out of order, puts and tombstones alike.
func TestDeltaWriter_RefusesKeysOutOfOrder(t *testing.T) {
	for _, tomb := range []bool{false, true} {
		var buf bytes.Buffer
		w := newDeltaWriter(&buf, 5, 1, 1)
		w.put(index.Probe([]byte("b")), []byte("v"), 1, false)
		if tomb {
			w.tombstone([]byte("a"))
		} else {
			w.put(index.Probe([]byte("a")), []byte("v"), 1, false)
		}
		if err := w.finish(); err == nil {
			t.Fatalf("tombstone %v: a delta written out of order", tomb)
		}
	}
}
