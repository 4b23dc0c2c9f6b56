package engine

import (
	"encoding/binary"
	"fmt"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// A value-log pointer is stored in place of the value, in a checkpoint
// record and in the tree's item, in one of two forms told apart by length:
//
//	fixed    segment u32 | offset u32 | record length u32  (little-endian, 12 bytes)
//	compact  uvarint(segment) | uvarint(offset) | uvarint(record length)  (3 to 11 bytes)
//
// Checkpoints of format IDEMCKP4 and IDEMDLT2 hold the fixed form only;
// IDEMCKP5, IDEMDLT3 and later hold either, and this build writes the compact one
// whenever it is shorter than 12 bytes (with the default 64 MiB segments,
// until the segment number passes 2^21). A retained receipt's pointer is 7 bytes instead
// of 12: its item aliases the checkpoint image, so the 5 bytes are RAM as
// well as disk (issue 41, docs/benchmarks.md).
const (
	vlogPtrLen        = 12 // the fixed form, and the most a pointer takes
	vlogPtrCompactMin = 3
)

// vlogPtr says where a value lives.
type vlogPtr struct {
	seg, off, n uint32
}

// encode appends the pointer's shortest form: compact below 12 bytes.
func (p vlogPtr) encode(dst []byte) []byte {
	var c [3 * binary.MaxVarintLen32]byte
	b := binary.AppendUvarint(c[:0], uint64(p.seg))
	b = binary.AppendUvarint(b, uint64(p.off))
	b = binary.AppendUvarint(b, uint64(p.n))
	if len(b) < vlogPtrLen {
		return append(dst, b...)
	}
	dst = binary.LittleEndian.AppendUint32(dst, p.seg)
	dst = binary.LittleEndian.AppendUint32(dst, p.off)
	return binary.LittleEndian.AppendUint32(dst, p.n)
}

// item is the tree item that points key, at version, to p's record, its
// key packed if it can be (as a checkpoint's image would hold it).
func (p vlogPtr) item(key []byte, version uint64) index.KV {
	var scratch [vlogPtrLen]byte
	ptr := p.encode(scratch[:0])
	buf, packed := index.AppendStoredKey(make([]byte, 0, len(key)+len(ptr)+binary.MaxVarintLen64), key)
	klen := len(buf)
	buf = binary.AppendUvarint(append(buf, ptr...), version)
	kv := index.IndirectKV(buf, klen, len(ptr))
	if packed {
		kv = kv.WithPackedKey()
	}
	return kv
}

// decodeVlogPtr reads either form; anything else is ErrCorruption.
func decodeVlogPtr(b []byte) (vlogPtr, error) {
	if len(b) == vlogPtrLen {
		return vlogPtr{seg: binary.LittleEndian.Uint32(b), off: binary.LittleEndian.Uint32(b[4:]), n: binary.LittleEndian.Uint32(b[8:])}, nil
	}
	if p, ok := compactPtr(b); ok {
		return p, nil
	}
	return decodeVlogPtrLong(b)
}

// compactPtr reads the compact form when each of its three uvarints takes
// at most five bytes, as every one this build writes does; false leaves
// the rest to decodeVlogPtrLong, which accepts what binary.Uvarint does.
// An open tallies every pointer of its chain by segment (itemtally.go):
// binary.Uvarint's loop, three calls a pointer, took 13 ns of it.
func compactPtr(b []byte) (vlogPtr, bool) {
	seg, n1 := uvarint32(b)
	off, n2 := uvarint32(b[n1:])
	n, n3 := uvarint32(b[n1+n2:])
	if n1 == 0 || n2 == 0 || n3 == 0 || n1+n2+n3 != len(b) || len(b) < vlogPtrCompactMin {
		return vlogPtr{}, false
	}
	return vlogPtr{seg: seg, off: off, n: n}, true
}

// uvarint32 reads a uvarint of at most five bytes and at most 2^32-1;
// 0 bytes read if b does not start with one.
func uvarint32(b []byte) (uint32, int) {
	var x uint32
	for i := 0; i < len(b) && i < 5; i++ {
		c := b[i]
		if c < 0x80 {
			if i == 4 && c > 0x0f {
				return 0, 0
			}
			return x | uint32(c)<<(7*i), i + 1
		}
		x |= uint32(c&0x7f) << (7 * i)
	}
	return 0, 0
}

// decodeVlogPtrLong is decodeVlogPtr's compact form in general.
func decodeVlogPtrLong(b []byte) (vlogPtr, error) {
	var f [3]uint64
	rest := b
	for i := range f {
		v, k := binary.Uvarint(rest)
		if k <= 0 || v > 1<<32-1 {
			return vlogPtr{}, fmt.Errorf("%w: value-log pointer %x", store.ErrCorruption, b)
		}
		f[i], rest = v, rest[k:]
	}
	if len(rest) != 0 || len(b) < vlogPtrCompactMin {
		return vlogPtr{}, fmt.Errorf("%w: value-log pointer of %d bytes", store.ErrCorruption, len(b))
	}
	return vlogPtr{seg: uint32(f[0]), off: uint32(f[1]), n: uint32(f[2])}, nil
}

// isPtr reports whether a stored pointer, in either form, is p: an item
// loaded from an IDEMCKP4 part holds the fixed form, one made since the
// compact form, so the bytes are not compared.
func isPtr(b []byte, p vlogPtr) bool {
	q, err := decodeVlogPtr(b)
	return err == nil && q == p
}

// samePtr reports whether two stored pointers lead to the same record.
func samePtr(a, b []byte) bool {
	p, err := decodeVlogPtr(b)
	return err == nil && isPtr(a, p)
}

// ptrForm is which pointers a checkpoint format's records may hold.
type ptrForm uint8

const (
	ptrNone    ptrForm = iota // IDEMCKP2, IDEMCKP3, IDEMDLT1: no indirect bit
	ptrFixed                  // IDEMCKP4, IDEMDLT2
	ptrCompact                // IDEMCKP5 to IDEMCKP7, IDEMDLT3, IDEMDLT4: either form
)

// lenOK reports whether an indirect record's stored length fits the form.
func (f ptrForm) lenOK(n uint64) bool {
	switch f {
	case ptrFixed:
		return n == vlogPtrLen
	case ptrCompact:
		return n >= vlogPtrCompactMin && n <= vlogPtrLen
	}
	return false
}
