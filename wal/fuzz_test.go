package wal

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"testing"
)

// The seed corpora below run as ordinary tests under `go test`; `go test
// -fuzz=FuzzDecodeFrame ./wal/` explores further.

// FuzzDecodeFrame proves that decodeFrame never panics, that a frame made
// by appendFrame decodes to its kind and body at its own index, that it fails
// at another index, and that whatever decodes is exactly what appendFrame
// would have written (no second encoding of the same entry is accepted).
func FuzzDecodeFrame(f *testing.F) {
	f.Add(uint64(1), uint8(KindBatch), []byte("hello"), uint32(0), []byte{}, uint64(2))
	f.Add(uint64(0), uint8(KindNoop), []byte{}, uint32(14), []byte{frameMagic0, frameMagic1, frameVersion, 2, 0, 0, 0, 0, 0}, uint64(1))
	f.Add(uint64(1<<40), uint8(KindBatch), bytes.Repeat([]byte{0}, 64), uint32(4096), make([]byte, 64), uint64(1<<40+1))
	f.Add(uint64(7), uint8(0), []byte("x"), uint32(0), appendFrame(nil, 7, KindBatch, []byte("x"), 0), uint64(7))
	f.Add(uint64(7), uint8(3), []byte("x"), uint32(99), appendFrame(nil, 8, KindNoop, nil, 12), uint64(0xffffffff00000007))
	f.Add(^uint64(0), uint8(KindBatch), []byte{0xff}, uint32(1), []byte{0xD1, 0xE3, 1, 1, 1, 1, 2, 3, 4}, uint64(0))
	f.Fuzz(func(t *testing.T, index uint64, kind uint8, body []byte, part uint32, raw []byte, other uint64) {
		// Arbitrary bytes: no panic, and success means canonical.
		if fr, err := decodeFrame(index, raw); err == nil {
			if re := appendFrame(nil, index, fr.kind, fr.body, fr.part); !bytes.Equal(re, raw) {
				t.Fatalf("decoded %x as %+v, which encodes as %x", raw, fr, re)
			}
		}

		fr := appendFrame(nil, index, Kind(kind), body, part)
		if len(fr) != frameSize(len(body), part > 0) {
			t.Fatalf("frame of %d bytes, frameSize says %d", len(fr), frameSize(len(body), part > 0))
		}
		got, err := decodeFrame(index, fr)
		valid := Kind(kind) != KindInvalid && Kind(kind) <= kindMax
		switch {
		case valid && err != nil:
			t.Fatalf("own frame (index %d kind %d) does not decode: %v", index, kind, err)
		case valid && (got.kind != Kind(kind) || !bytes.Equal(got.body, body) || got.part != part):
			t.Fatalf("decoded %+v, want kind %d body %x part %d", got, kind, body, part)
		case !valid && err == nil:
			t.Fatalf("frame with invalid kind %d decoded", kind)
		}
		// CRC-32C detects every error burst of up to 32 bits, so a frame is
		// certainly rejected at any index that differs from its own within a
		// 32-bit window (every pair of real log positions does). Wider
		// differences may collide by the pigeonhole principle; they must
		// still not panic.
		if d := index ^ other; d != 0 {
			_, err := decodeFrame(other, fr)
			if bits.Len64(d)-bits.TrailingZeros64(d) <= 32 && err == nil {
				t.Fatalf("frame of index %d decoded at index %d", index, other)
			}
		}
		// A prefix shorter than the header is rejected; a longer one can only
		// pass by a CRC collision (which an adversarial body can arrange),
		// so it must merely not panic.
		if len(fr) > 0 {
			cut := int(other % uint64(len(fr)))
			if _, err := decodeFrame(index, fr[:cut]); err == nil && cut < frameHeader {
				t.Fatalf("prefix of %d/%d bytes decoded", cut, len(fr))
			}
		}
	})
}

// FuzzScanSegment proves that reading an arbitrary segment never panics and
// that the valid prefix it reports re-reads identically.
func FuzzScanSegment(f *testing.F) {
	var seg []byte
	for i := uint64(1); i <= 3; i++ {
		fr := appendFrame(nil, i, KindBatch, body(i), 0)
		seg = binary.AppendUvarint(seg, uint64(len(fr)))
		seg = append(seg, fr...)
	}
	f.Add(seg)
	f.Add(seg[:len(seg)-4])
	f.Add(append(append([]byte(nil), seg...), make([]byte, 20)...))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := scanSegment(data, 1, nil)
		if err != nil {
			t.Fatalf("scan without callback returned %v", err)
		}
		// The scan ends at the data's end, at fill (a zero length prefix
		// and only zeros after it), or at damage.
		ended := r.validEnd == len(data) && !r.fill
		filled := r.fill && r.validEnd < len(data) && isZero(data[r.validEnd:])
		if r.validEnd > len(data) || (r.err == nil) != (ended || filled) || r.err != nil && r.fill {
			t.Fatalf("scan result %+v for %d bytes", r, len(data))
		}
		var n uint64
		r2, _ := scanSegment(data[:r.validEnd], 1, func(index uint64, _ Kind, _ []byte) error {
			n++
			if index != n {
				t.Fatalf("entry %d seen as %d", n, index)
			}
			return nil
		})
		if r2.err != nil || r2.entries != r.entries || n != r.entries {
			t.Fatalf("valid prefix re-read as %+v (%d entries), first read %+v", r2, n, r)
		}
	})
}
