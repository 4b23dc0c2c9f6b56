package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// TestVlogPtr_ShortestFormRoundTrips: every pointer decodes to itself,
// compact while its varints are shorter than 12 bytes, fixed after.
func TestVlogPtr_ShortestFormRoundTrips(t *testing.T) {
	vals := []uint32{0, 1, 127, 128, 16383, 16384, 1<<21 - 1, 1 << 21, 1<<28 - 1, 1 << 28, math.MaxUint32}
	for _, seg := range vals {
		for _, off := range vals {
			for _, n := range vals {
				p := vlogPtr{seg: seg, off: off, n: n}
				b := p.encode([]byte("x")) // appends
				if b[0] != 'x' {
					t.Fatalf("%v: encode overwrote dst", p)
				}
				b = b[1:]
				varints := uvarintLen(seg) + uvarintLen(off) + uvarintLen(n)
				want := varints
				if varints >= vlogPtrLen {
					want = vlogPtrLen
				}
				if len(b) != want {
					t.Fatalf("%v: %d bytes, want %d", p, len(b), want)
				}
				got, err := decodeVlogPtr(b)
				if err != nil || got != p {
					t.Fatalf("%v: decoded %v, %v", p, got, err)
				}
			}
		}
	}
	// A retained receipt's: segment 1, an offset in a 64 MiB segment, a
	// record of a few hundred bytes.
	if b := (vlogPtr{seg: 1, off: 60 << 20, n: 450}).encode(nil); len(b) != 7 {
		t.Fatalf("a receipt's pointer takes %d bytes, want 7", len(b))
	}
}

func uvarintLen(v uint32) int { return len(binary.AppendUvarint(nil, uint64(v))) }

// TestVlogPtr_ReadsBothFormsAndRejectsTheRest: the fixed form an IDEMCKP4
// item holds is the same pointer as the compact one; a pointer of another
// length, with bytes left over or a field past 32 bits is ErrCorruption.
func TestVlogPtr_ReadsBothFormsAndRejectsTheRest(t *testing.T) {
	p := vlogPtr{seg: 3, off: 1000, n: 77}
	fixed := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 3), 1000), 77)
	compact := p.encode(nil)
	if len(compact) >= vlogPtrLen || !isPtr(fixed, p) || !isPtr(compact, p) || !samePtr(fixed, compact) {
		t.Fatalf("fixed %x and compact %x are not both %v", fixed, compact, p)
	}
	if samePtr(compact, (vlogPtr{seg: 3, off: 1000, n: 78}).encode(nil)) {
		t.Fatal("two pointers taken for one")
	}
	bad := [][]byte{
		nil, {1}, {1, 2},
		append(append([]byte(nil), compact...), 0),                   // a byte left over
		{0x80, 0x80, 0x80, 0x80, 0x10, 1, 1},                         // a segment past 32 bits
		{1, 1, 0x80},                                                 // a varint cut short
		make([]byte, vlogPtrLen+1),                                   // too long
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, // not three fields
	}
	for _, b := range bad {
		if _, err := decodeVlogPtr(b); !errors.Is(err, store.ErrCorruption) {
			t.Errorf("%x: %v, want ErrCorruption", b, err)
		}
		if isPtr(b, p) {
			t.Errorf("%x taken for %v", b, p)
		}
	}
}

// TestVlogPtr_EachFormatHoldsItsOwnPointers: an IDEMCKP4/IDEMDLT2 record
// with a compact pointer is refused, an IDEMCKP5/IDEMDLT3 one takes both.
func TestVlogPtr_EachFormatHoldsItsOwnPointers(t *testing.T) {
	record := func(ptr []byte) []byte {
		b := binary.AppendUvarint(nil, 1)
		b = binary.AppendUvarint(b, flaggedLen(len(ptr), true))
		b = append(append(b, 'k'), ptr...)
		return binary.AppendUvarint(b, 5)
	}
	compact := (vlogPtr{seg: 1, off: 2, n: 3}).encode(nil)
	fixed := make([]byte, vlogPtrLen)
	for _, c := range []struct {
		form ptrForm
		ptr  []byte
		ok   bool
	}{
		{ptrFixed, fixed, true}, {ptrFixed, compact, false},
		{ptrCompact, fixed, true}, {ptrCompact, compact, true}, {ptrCompact, compact[:2], false},
	} {
		rec := record(c.ptr)
		var got []byte
		_, err := decodeRecords(rec, 1, 10, c.form, false, func(_ index.KV, v []byte, _ store.Version, indirect bool) error {
			if !indirect {
				t.Fatal("an indirect record decoded as a value")
			}
			got = v
			return nil
		})
		if (err == nil) != c.ok || (c.ok && string(got) != string(c.ptr)) {
			t.Errorf("form %d, %d-byte pointer: %v, value %x", c.form, len(c.ptr), err, got)
		}
	}
}

// TestVlogPtr_TheCollectorMovesTheFixedPointersOfAnIDEMCKP4Chain: the
// collector recognises the items an IDEMCKP4 base and IDEMDLT2 delta
// loaded (fixed pointers) as pointing at the records it moves, and points
// them at the copies in the compact form, which a reopen reads back.
func TestVlogPtr_TheCollectorMovesTheFixedPointersOfAnIDEMCKP4Chain(t *testing.T) {
	dir, _ := copyFixture(t, filepath.Join("testdata", "v4-dir"))
	cold := func(_, v []byte) bool { return bytes.HasPrefix(v, []byte("cold")) }
	opts := quiet(Options{CheckpointLogBytes: -1, ColdValue: cold})
	db := openT(t, dir, opts)
	if n := indirectItems(db, vlogPtrLen); n == 0 {
		t.Fatal("the fixture loaded no fixed pointer")
	}
	for i := range 12 { // the fixture's segment falls below half live
		deleteT(t, db, fmt.Sprintf("k%03d", i))
	}
	want := scanAll(t, db)
	for range 4 {
		putT(t, db, "hot", fmt.Sprint("tick ", len(want)))
		want = scanAll(t, db)
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		if err := db.merges.mergeAll(); err != nil {
			t.Fatal(err)
		}
		sameState(t, "while collecting", scanAll(t, db), want)
	}
	if vs := db.Stats().ValueLog; vs.Relocated == 0 {
		t.Fatalf("value-log stats %+v: the fixture's live records were not moved", vs)
	}
	if n := indirectItems(db, vlogPtrLen); n != 0 {
		t.Fatalf("%d items still hold fixed pointers after the collection", n)
	}
	db = reopenSame(t, db, dir, opts, want, "after reopen")
	db.Close()
}

// indirectItems counts the tree's pointers of length n.
func indirectItems(db *DB, n int) int {
	db.treeMu.RLock()
	defer db.treeMu.RUnlock()
	count := 0
	db.tree.AscendAll(func(it index.KV) bool {
		if it.Indirect() && len(it.Value()) == n {
			count++
		}
		return true
	})
	return count
}

// FuzzDecodeVlogPtr: any bytes either fail as ErrCorruption or are a
// pointer whose shortest form decodes to the same.
func FuzzDecodeVlogPtr(f *testing.F) {
	f.Add((vlogPtr{seg: 1, off: 60 << 20, n: 450}).encode(nil))
	f.Add(make([]byte, vlogPtrLen))
	f.Add([]byte{1, 2})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0xff, 0xff, 0xff, 0xff, 0x0f, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodeVlogPtr(b)
		if err != nil {
			if !errors.Is(err, store.ErrCorruption) {
				t.Fatalf("%x: %v", b, err)
			}
			return
		}
		if e := p.encode(nil); !isPtr(e, p) || len(e) > len(b) {
			t.Fatalf("%x = %v re-encodes as %x", b, p, e)
		}
	})
}

// The compact form's fast read (compactPtr) decides every string it
// takes as the general decode does: the same pointer, or the same refusal.
func TestVlogPtr_TheFastCompactReadAgreesWithTheGeneralOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t), 59))
	shapes := []byte{0x00, 0x01, 0x0f, 0x10, 0x7f, 0x80, 0x81, 0x8f, 0xff}
	for range 200_000 {
		b := make([]byte, rng.IntN(vlogPtrLen+2))
		for i := range b {
			if b[i] = shapes[rng.IntN(len(shapes))]; rng.IntN(4) == 0 {
				b[i] = byte(rng.IntN(256))
			}
		}
		if len(b) == vlogPtrLen {
			continue // the fixed form, read before either
		}
		want, werr := decodeVlogPtrLong(b)
		got, gerr := decodeVlogPtr(b)
		if got != want || (gerr == nil) != (werr == nil) {
			t.Fatalf("%x: %v %v, the general decode %v %v", b, got, gerr, want, werr)
		}
	}
}

// BenchmarkDecodeVlogPtr is what a read of a cold value pays to find it,
// before its pread: a retained receipt's pointer in each form.
func BenchmarkDecodeVlogPtr(b *testing.B) {
	p := vlogPtr{seg: 1, off: 60 << 20, n: 450}
	for _, c := range []struct {
		name string
		b    []byte
	}{{"compact", p.encode(nil)}, {"fixed", binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, p.seg), p.off), p.n)}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if q, err := decodeVlogPtr(c.b); err != nil || q != p {
					b.Fatal(q, err)
				}
			}
		})
	}
}
