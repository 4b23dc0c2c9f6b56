package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/index"
)

// An open's load of a part (issue 38). A part's records were proven well
// formed and in strictly increasing key order as they were written
// (partWriter refuses a key not above the one before), and its CRC
// vouches that the file holds the bytes written. So an open, once the CRC
// matches, reads each record's two lengths and their flags, makes its
// item and steps over its version, and takes the records' sums from the
// part's tally block (tallyblock.go): BenchmarkLoadPart, the CRC
// included, 11–12 ns a record, 24–27 summing each record's value-log
// pointer (a part without the block), 56–59 for the full decode
// (decodePart: the varints' every form, the bounds, the version against
// the part's, the order against the record before, the block against the
// records), which idemctl check, a merge's input and every other reader
// keep. At a crash loop's 19 M records that decode was 45 % of an open's CPU
// (docs/engine.md, "What an open's time is made of"). The load still
// checks what keeps the items inside the image — every length against
// the bytes left, a packed key's sixteen bytes, a pointer's length — that
// the records and their tally block end where the trailer says, and the
// range at its two ends.

// loadPartItems is decodePart for an open: each record, as an item
// aliasing data, into dst (room for exactly m's count), added to tally
// unless that is nil. A legacy checkpoint, a single file of its own
// format, is not a part: loadGeneration decodes it whole.
func loadPartItems(data []byte, m partMeta, dst []index.KV, tally *itemTally) error {
	if uint64(len(dst)) != m.count {
		return fmt.Errorf("%d records, room for %d", m.count, len(dst))
	}
	if m.legacy {
		return errors.New("a legacy checkpoint: its load is decodePartFile's")
	}
	recs, h, err := partBody(data, m)
	if err != nil {
		return err
	}
	if err := partItems(recs, h, dst, tally); err != nil {
		return err
	}
	if m.count > 0 {
		if dst[0].CompareKey(index.Probe(m.start)) < 0 {
			return fmt.Errorf("key %q outside the part's range", dst[0].Key())
		}
		if last := dst[m.count-1]; len(m.end) > 0 && last.CompareKey(index.Probe(m.end)) >= 0 {
			return fmt.Errorf("key %q outside the part's range", last.Key())
		}
	}
	return nil
}

// loadPartInto reads the part p and loads its items into dst, room for
// exactly its count, adding each to tally unless that is nil
// (loadPartItems: the CRC vouches for the records' order).
func (db *DB) loadPartInto(p partMeta, dst []index.KV, tally *itemTally) error {
	data, err := db.readPartImage(p)
	if err != nil {
		return err
	}
	if err := loadPartItems(data, p, dst, tally); err != nil {
		return fmt.Errorf("%w: %s: %w", errCheckpointDamaged, p.name, err)
	}
	return nil
}

// readPartImage reads (or maps) the part p's file.
func (db *DB) readPartImage(p partMeta) ([]byte, error) {
	data, err := db.readImage(p.name, p.size, db.opts.MapCheckpoints)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s vanished", errCheckpointDamaged, p.name)
	}
	return data, err
}

// partBody checks a part image's size and CRC against its meta and
// returns its records' bytes and what its header says.
func partBody(data []byte, m partMeta) ([]byte, partMeta, error) {
	if int64(len(data)) != m.size {
		return nil, partMeta{}, fmt.Errorf("%d bytes, %d when listed", len(data), m.size)
	}
	bodyEnd := len(data) - partTrailerLen - len(m.end)
	tr := data[len(data)-partTrailerLen:]
	if binary.LittleEndian.Uint32(tr[13:]) != crc32.Checksum(data[:bodyEnd], castagnoli) &&
		!fault.Planted(fault.BugCkptIgnoresCRC) { // planted only under -tags idem_selftest
		return nil, partMeta{}, errors.New("checksum mismatch")
	}
	h, at, err := parsePartHeader(data[:bodyEnd])
	if err != nil {
		return nil, partMeta{}, err
	}
	return data[at:bodyEnd], h, nil
}

// partItems makes the items of recs, the records of a part of header h
// (and its tally block, if it has one), into dst, which they must fill
// exactly, and adds them to tally unless that is nil: from the block
// when there is one, else record by record.
func partItems(recs []byte, h partMeta, dst []index.KV, tally *itemTally) error {
	perRecord := tally
	if h.tallied {
		perRecord = nil
	}
	at := 0
	for i := range dst {
		b := recs[at:]
		klen, packed, vf, n, err := recordHead(b, h.packed)
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		kv, size, err := recordItem(b, n, klen, vf, packed, h.ptrs)
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		dst[i] = kv
		perRecord.addIf(kv)
		at += size
	}
	if h.tallied {
		return tally.addBlock(recs[at:])
	}
	if at != len(recs) {
		return fmt.Errorf("%d trailing bytes", len(recs)-at)
	}
	return nil
}

// recordItem makes the item of a record (a part's, a delta's put) whose
// stored key of klen bytes starts at b[n:], vf being its value's length
// field, and returns the record's size. It checks what keeps the item
// inside b: the key, the value and at least one byte of version fit, a
// pointer's length is one of its forms', the version ends.
func recordItem(b []byte, n int, klen, vf uint64, packed bool, ptrs ptrForm) (index.KV, int, error) {
	vlen, indirect := vf, false
	if ptrs != ptrNone {
		vlen, indirect = vf>>1, vf&1 == 1
	}
	switch {
	case klen >= uint64(len(b)-n) || vlen >= uint64(len(b)-n)-klen:
		return index.KV{}, 0, errors.New("bad key or value")
	case indirect && !ptrs.lenOK(vlen):
		return index.KV{}, 0, fmt.Errorf("a value-log pointer of %d bytes", vlen)
	}
	end := n + int(klen+vlen)
	kv := index.PackedKV(b[n:end], int(klen), int(vlen))
	if indirect {
		kv = index.IndirectKV(b[n:end], int(klen), int(vlen))
	}
	if packed {
		kv = kv.WithPackedKey()
	}
	v := end
	for v < len(b) && v-end < binary.MaxVarintLen64 && b[v] >= 0x80 {
		v++
	}
	if v == len(b) || b[v] >= 0x80 {
		return index.KV{}, 0, errors.New("bad version")
	}
	return kv, v + 1, nil
}

// recordHead reads a record's length fields: its stored key's length and
// whether it is packed (a format with the bit, packedForm, says so), its
// value's length field, and the bytes they took. The key must not be
// empty, and a packed one must hold its sixteen bytes.
func recordHead(b []byte, packedForm bool) (klen uint64, packed bool, vf uint64, n int, err error) {
	kf, vf, n := recordLengths(b)
	if n == 0 {
		return 0, false, 0, 0, errors.New("bad lengths")
	}
	klen = kf
	if packedForm {
		klen, packed = kf>>1, kf&1 == 1
	}
	if klen == 0 || packed && !index.PackedKeyOK(int(klen)) {
		return 0, false, 0, 0, errors.New("bad key")
	}
	return klen, packed, vf, n, nil
}

// recordLengths reads a record's key and value length fields, inline when
// each takes one byte, as nearly every record's do; n is 0 if b does not
// start with two.
func recordLengths(b []byte) (kf, vf uint64, n int) {
	if len(b) >= 2 && b[0]|b[1] < 0x80 {
		return uint64(b[0]), uint64(b[1]), 2
	}
	kf, n1 := binary.Uvarint(b)
	if n1 <= 0 {
		return 0, 0, 0
	}
	vf, n2 := binary.Uvarint(b[n1:])
	if n2 <= 0 {
		return 0, 0, 0
	}
	return kf, vf, n1 + n2
}

// keyOrder is a checkpoint writer's proof that its keys strictly
// increase: err holds the first that did not, and the writer's finish
// refuses the file.
type keyOrder struct {
	last index.KV // zero before the first key (keys are never empty)
	buf  []byte   // a copy of the last key, if it came as bytes (nextCopy)
	err  error
}

// next takes an item whose bytes stay as they are until the writer is
// done: the tree's items, and the images' a merge reads.
func (o *keyOrder) next(key index.KV) {
	if o.last != (index.KV{}) && o.err == nil && o.last.CompareKey(key) >= 0 {
		o.err = fmt.Errorf("engine: invariant broken: checkpoint key %q written after %q", key.Key(), o.last.Key())
	}
	o.last = key
}

// nextCopy is next for a key whose bytes the caller may reuse.
func (o *keyOrder) nextCopy(key []byte) {
	o.next(index.Probe(key))
	o.buf = append(o.buf[:0], key...)
	o.last = index.Probe(o.buf)
}
