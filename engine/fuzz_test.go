package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"testing"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// The seed corpora below run as ordinary tests under `go test`; `go test
// -fuzz=FuzzDecodePart ./engine/` explores further.

type ckptRec struct {
	key, val []byte
	ver      store.Version
}

// snapshotOf builds a snapshot at version at from records.
func snapshotOf(at store.Version, recs []ckptRec) *Snapshot {
	tree := index.NewKeySpace()
	for _, r := range recs {
		tree.Put(index.PackedKV(index.AppendKV(nil, r.key, r.val, uint64(r.ver)), len(r.key), len(r.val)))
	}
	return &Snapshot{tree: tree, version: at}
}

// encodeCkpt encodes snap as a checkpoint of one part.
func encodeCkpt(t testing.TB, snap *Snapshot) []byte {
	var buf bytes.Buffer
	w := newPartWriter(&buf, snap.version, 0, snap.version, nil)
	snap.tree.AscendAll(func(it index.KV) bool { w.add(it, it.Value(), it.Version(), it.Indirect()); return true })
	if err := w.finish(nil, true); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func decodeRecs(data []byte) (store.Version, []ckptRec, error) {
	m, err := partMetaOf(data, data, int64(len(data)))
	if err != nil {
		return 0, nil, err
	}
	var recs []ckptRec
	err = decodePart(data, m, func(k index.KV, v []byte, ver store.Version, _ bool) {
		recs = append(recs, ckptRec{k.Key(), bytes.Clone(v), ver})
	})
	return m.version, recs, err
}

// recsFrom turns fuzz bytes into checkpoint records with versions in 1..at.
func recsFrom(raw []byte, at store.Version) []ckptRec {
	var recs []ckptRec
	for len(raw) > 0 {
		kl, hexTail := 1+int(raw[0]%8), raw[0]&0x80 != 0
		raw = raw[1:]
		if kl > len(raw) || (hexTail && kl+16 > len(raw)) {
			break
		}
		key := raw[:kl]
		raw = raw[kl:]
		if hexTail { // a key a part packs: 16 more bytes as 32 hex digits
			key = hex.AppendEncode(bytes.Clone(key), raw[:16])
			raw = raw[16:]
		}
		vl := 0
		if len(raw) > 0 {
			vl = min(int(raw[0]%32), len(raw)-1)
			raw = raw[1:]
		}
		val := raw[:vl]
		raw = raw[vl:]
		ver := store.Version(1)
		if len(raw) > 0 {
			ver = 1 + store.Version(raw[0])%at
			raw = raw[1:]
		}
		recs = append(recs, ckptRec{key, val, ver})
	}
	return recs
}

// FuzzDecodePart proves that decodePart never panics on any
// input, that whatever it accepts is ordered, versioned within its index
// and re-encodes to an image that decodes the same, and that any snapshot
// round-trips through a part writer and decodePart â while every
// strict prefix of its image is rejected.
func FuzzDecodePart(f *testing.F) {
	valid := encodeCkpt(f, snapshotOf(9, []ckptRec{{[]byte("a"), []byte("1"), 3}, {[]byte("b"), nil, 9}, {[]byte("c\x00"), []byte("xyz"), 1}}))
	empty := encodeCkpt(f, snapshotOf(0, nil))
	flipped := bytes.Clone(valid)
	flipped[30] ^= 1
	huge := bytes.Clone(empty)
	binary.LittleEndian.PutUint64(huge[len(huge)-partTrailerLen+5:], 1<<62) // count far beyond the data
	f.Add(valid, []byte("\x02ab\x03xyz\x05\x01c"), uint64(7))
	f.Add(empty, []byte{}, uint64(0))
	f.Add(valid[:len(valid)-1], []byte("\x00k\x00"), uint64(1))
	f.Add(flipped, []byte("\x07abcdefgh\x1f"), uint64(1<<40))
	f.Add(huge, []byte{0xff, 0xff, 0xff}, ^uint64(0))
	packed := encodeCkpt(f, snapshotOf(9, []ckptRec{
		{[]byte("0123456789abcdef0123456789abcdef"), []byte("1"), 3},
		{[]byte("rcpt/v1/0123456789ABCDEF0123456789abcdef"), nil, 9},
		{[]byte("rcpt/v1/0123456789abcdef0123456789abcdef"), []byte("xyz"), 1},
		{[]byte("rcpt/v1/0123456789abcdef0123456789abcdef/"), []byte("w"), 2},
	}))
	f.Add(packed, []byte("\x81a0123456789abcdef\x03xyz\x05\x82rc0123456789abcdef\x00\x01"), uint64(9))
	f.Add(packed[:len(packed)-9], []byte("\x88rcpt/v1/\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff"), uint64(3))
	f.Add([]byte(partMagic+"\x00\x00\x00\x00\x00\x00\x00\x00\x01"), []byte("\x01a\x00\x01\x01a\x00\x02"), uint64(2))
	f.Fuzz(func(t *testing.T, raw, recBytes []byte, at uint64) {
		// Arbitrary input: no panic; what decodes is well formed.
		if got, recs, err := decodeRecs(raw); err == nil {
			for i, r := range recs {
				if len(r.key) == 0 || r.ver == 0 || r.ver > got || (i > 0 && bytes.Compare(recs[i-1].key, r.key) >= 0) {
					t.Fatalf("decoded ill-formed record %d %+v (index %d)", i, r, got)
				}
			}
			again, recs2, err := decodeRecs(encodeCkpt(t, snapshotOf(got, recs)))
			if err != nil || again != got || !sameRecs(recs, recs2) {
				t.Fatalf("re-encoded image decodes as %d %v, %v; want %d %v", again, recs2, err, got, recs)
			}
		}

		// Any snapshot round-trips.
		v := store.Version(max(at, 1))
		snap := snapshotOf(v, recsFrom(recBytes, v))
		var want []ckptRec
		snap.tree.AscendAll(func(kv index.KV) bool {
			want = append(want, ckptRec{kv.Key(), kv.Value(), store.Version(kv.Version())})
			return true
		})
		img := encodeCkpt(t, snap)
		got, recs, err := decodeRecs(img)
		if err != nil || got != v || !sameRecs(recs, want) {
			t.Fatalf("round trip: %d %v, %v; want %d %v", got, recs, err, v, want)
		}
		cut := int(at % uint64(len(img)))
		if _, _, err := decodeRecs(img[:cut]); err == nil {
			t.Fatalf("a %d-byte prefix of a %d-byte checkpoint decoded", cut, len(img))
		}
	})
}

func sameRecs(a, b []ckptRec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].key, b[i].key) || !bytes.Equal(a[i].val, b[i].val) || a[i].ver != b[i].ver {
			return false
		}
	}
	return true
}

// FuzzDecodeBody proves that decoding a batch body never panics and that
// encodeBody output decodes to the same ops.
func FuzzDecodeBody(f *testing.F) {
	f.Add(encodeBody(nil, []store.Op{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Delete: true}}), []byte("\x01k\x02v"))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, []byte{})
	f.Add([]byte{1, opPut, 1, 'k', 5}, []byte{0})
	f.Add([]byte{1, 9, 1, 'k'}, []byte("\x00"))
	f.Fuzz(func(t *testing.T, raw, opBytes []byte) {
		_ = decodeBody(raw, func(store.Op) {})

		var ops []store.Op
		for len(opBytes) > 0 {
			kl := 1 + int(opBytes[0]%6)
			del := opBytes[0]&0x80 != 0
			opBytes = opBytes[1:]
			if kl > len(opBytes) {
				break
			}
			op := store.Op{Key: opBytes[:kl], Delete: del}
			opBytes = opBytes[kl:]
			if !del {
				vl := 0
				if len(opBytes) > 0 {
					vl = min(int(opBytes[0]%16), len(opBytes)-1)
					opBytes = opBytes[1:]
				}
				op.Value = opBytes[:vl]
				opBytes = opBytes[vl:]
			}
			ops = append(ops, op)
		}
		if len(ops) == 0 {
			return
		}
		body := encodeBody(nil, ops)
		if len(body) > encodedBodySize(ops) {
			t.Fatalf("body of %d bytes exceeds its size bound %d", len(body), encodedBodySize(ops))
		}
		var got []store.Op
		if err := decodeBody(body, func(op store.Op) { got = append(got, op) }); err != nil {
			t.Fatalf("own body does not decode: %v", err)
		}
		if len(got) != len(ops) {
			t.Fatalf("decoded %d ops, want %d", len(got), len(ops))
		}
		for i := range ops {
			if !bytes.Equal(got[i].Key, ops[i].Key) || !bytes.Equal(got[i].Value, ops[i].Value) || got[i].Delete != ops[i].Delete {
				t.Fatalf("op %d decoded as %+v, want %+v", i, got[i], ops[i])
			}
		}
	})
}
