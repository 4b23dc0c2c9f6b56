package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// randomPart writes a part of random records: raw and packed keys, values
// inline and value-log pointers in both forms, lengths past one varint
// byte, versions of every width.
func randomPart(t *testing.T, rng *rand.Rand, start, end []byte) ([]byte, partMeta) {
	var buf bytes.Buffer
	keys := map[string]bool{}
	for range rng.IntN(300) {
		k := fmt.Sprintf("%s%0*d", start, 1+rng.IntN(90), rng.IntN(1e6))
		if rng.IntN(3) == 0 {
			k = fmt.Sprintf("%s%x/%032x", start, rng.IntN(1e6), rng.Uint64())
		}
		if len(end) == 0 || k < string(end) {
			keys[k] = true
		}
	}
	sorted := slices.Sorted(func(yield func(string) bool) {
		for k := range keys {
			if !yield(k) {
				return
			}
		}
	})
	version := store.Version(1 + rng.Uint64N(1<<40))
	w := newPartWriter(&buf, 1, 0, version, start)
	for _, k := range sorted {
		ver := 1 + rng.Uint64N(uint64(version))
		switch rng.IntN(3) {
		case 0:
			w.add(index.Probe([]byte(k)), bytes.Repeat([]byte{byte(rng.IntN(256))}, rng.IntN(300)), ver, false)
		case 1:
			p := vlogPtr{seg: rng.Uint32N(1 << 22), off: rng.Uint32(), n: rng.Uint32N(1 << 20)}
			w.add(index.Probe([]byte(k)), p.encode(nil), ver, true)
		default:
			p := vlogPtr{seg: rng.Uint32(), off: rng.Uint32(), n: rng.Uint32()}
			w.add(index.Probe([]byte(k)), binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, p.seg), p.off), p.n), ver, true)
		}
	}
	if err := w.finish(end, len(end) == 0); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	return data, partMetaT(t, data)
}

// partMetaT is the meta of the whole part image data.
func partMetaT(t testing.TB, data []byte) partMeta {
	t.Helper()
	m, err := partMetaOf(data, data, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// An open's load takes the records on the CRC's word; what it makes of
// them must be what the full decode, which proves each, makes: the same
// items, aliasing the same bytes, and the same tally.
func TestLoadPartItems_EqualsTheFullDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t), 41))
	for range 200 {
		start, end := []byte(fmt.Sprintf("k%d/", rng.IntN(5))), []byte(nil)
		if rng.IntN(2) == 0 {
			end = append(bytes.Clone(start), '5')
		}
		data, m := randomPart(t, rng, start, end)
		var want []index.KV
		var wantTally itemTally
		err := decodePart(data, m, func(k index.KV, v []byte, ver store.Version, indirect bool) {
			want = append(want, loadedKV(k, v, ver, indirect))
			wantTally.add(want[len(want)-1])
		})
		if err != nil {
			t.Fatal(err)
		}
		got := make([]index.KV, m.count)
		var gotTally itemTally
		if err := loadPartItems(data, m, got, &gotTally); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%d items, the decode %d", len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("item %d: %q %x v%d, the decode %q %x v%d", i, got[i].Key(), got[i].Value(), got[i].Version(), want[i].Key(), want[i].Value(), want[i].Version())
			}
		}
		gl, gv, wl, wv := int64(0), map[uint32]int64{}, int64(0), map[uint32]int64{}
		gotTally.sums(&gl, gv)
		wantTally.sums(&wl, wv)
		if gl != wl || !maps.Equal(gv, wv) {
			t.Fatalf("tally %d %v, the decode's %d %v", gl, gv, wl, wv)
		}
	}
}

// A part whose bytes are damaged yet whose CRC matches (a writer's bug,
// or a collision) must not take the load outside its image: the load
// refuses it, or makes items that all lie inside it.
func TestLoadPartItems_DamageUnderAMatchingCRCStaysInsideTheImage(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t), 43))
	loaded := 0
	for range 2000 {
		data, m := randomPart(t, rng, []byte("k/"), nil)
		_, at, err := parsePartHeader(data)
		if err != nil {
			t.Fatal(err)
		}
		bodyEnd := len(data) - partTrailerLen - len(m.end)
		if bodyEnd == at {
			continue
		}
		for range 1 + rng.IntN(4) {
			data[at+rng.IntN(bodyEnd-at)] ^= byte(1 + rng.IntN(255))
		}
		binary.LittleEndian.PutUint32(data[len(data)-partTrailerLen+13:], crc32.Checksum(data[:bodyEnd], castagnoli))
		dst := make([]index.KV, m.count)
		if loadPartItems(data, m, dst, &itemTally{}) != nil {
			continue
		}
		for i, kv := range dst {
			if !insideImage(data, kv, false) {
				t.Fatalf("item %d lies outside the image", i)
			}
		}
		loaded++
	}
	if loaded < 100 {
		t.Fatalf("only %d of 2000 damaged parts loaded: the bounds went untested", loaded)
	}
}

// insideImage reports whether kv's bytes — its stored key, and unless it
// is a tombstone its value and at least the first byte of its version —
// lie inside data, and reads its version (a fault if they do not).
func insideImage(data []byte, kv index.KV, tombstone bool) bool {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	sk := kv.StoredKey()
	p, end := uintptr(unsafe.Pointer(unsafe.SliceData(sk))), uintptr(len(sk))
	if !tombstone {
		end += uintptr(len(kv.Value())) + 1
		_ = kv.Version()
	}
	return p >= lo && p+end <= lo+uintptr(len(data))
}

// The writer refuses a part whose keys do not strictly increase: an
// open's load would take their order on the CRC's word.
func TestPartWriter_RefusesKeysOutOfOrder(t *testing.T) {
	for _, keys := range [][]string{{"b", "a"}, {"a", "a"}, {"a", "c", "b"}} {
		var buf bytes.Buffer
		w := newPartWriter(&buf, 1, 0, 5, nil)
		for _, k := range keys {
			w.add(index.Probe([]byte(k)), []byte("v"), 1, false)
		}
		if err := w.finish(nil, true); err == nil {
			t.Fatalf("keys %q: a part written", keys)
		}
	}
}
