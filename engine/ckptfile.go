package engine

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
)

// Checkpoint files.
//
// A checkpoint is a generation of parts. Each part holds, in key order, the
// keys of one range [start, end) as of its own snapshot version; the parts
// of a generation cover the key space in order, and the generation is
// named by v0, the snapshot version of its first part:
//
//	ckpt-<v0>-<seq>.ckpt
//	header   "IDEMCKP7" | v0 u64 | seq u32 | version u64 | uvarint(len start) | start
//	records  count × ( uvarint(len key << 1 | packed) | uvarint(len value << 1 | indirect) | key | value | uvarint(version) )
//	tally    the records' live bytes and the value log's by segment (tallyblock.go)
//	trailer  end | len(end) u32 | last u8 | count u64 | crc32c(header ‖ records ‖ tally) u32
//	         | crc32c(end ‖ len(end) ‖ last ‖ count ‖ that crc) u32 | "IDEMEND3"
//
// Parts are fuzzy: a later part is taken from a later snapshot, perhaps
// by a later process. Recovery loads every part and replays the log from
// v0 + 1, the oldest of their versions. That is exact: a key's last write
// in the log after v0 is either newer than its part's snapshot, and the
// replay puts it back last, or not, and then the part already holds what
// it wrote. So a checkpoint's progress survives a crash — each process
// adds parts to the generation the last one left — and a store that is
// killed more often than it can write a whole checkpoint still completes
// one. Each part is written to <name>.tmp, fsynced, renamed and the
// directory fsynced; the trailer alone says where the part ends, so a
// generation's progress is read without reading its records.
//
// packed says the key is stored packed: a key whose last 32 bytes are
// lowercase hex as its prefix and the 16 bytes they spell
// (index/packedkey.go); the writer packs every key that can be, and start
// and end stay raw. indirect says the value is a pointer into the value log
// (vlog.go), in either of its forms (vlogptr.go). Parts of format IDEMCKP6
// have no tally block (an open sums their records as it loads them);
// parts of format IDEMCKP5 have no packed bit either (the key's length is
// its length); parts of format IDEMCKP4 hold the fixed 12-byte pointer
// only; parts of format IDEMCKP3, written before the value log, have no
// indirect bit either. All are read as they are.
//
// A checkpoint written by earlier versions, ckpt-<index>.ckpt (format
// IDEMCKP2: header "IDEMCKP2" | index | count, records, crc32c, "IDEMEND1"),
// is read as a complete generation of one part at v0 = index.
const (
	ckptPrefix    = "ckpt-"
	ckptSuffix    = ".ckpt" // parts, and the single-file checkpoints of earlier versions
	ckptTmpSuffix = ".tmp"

	partMagic      = "IDEMCKP7"
	partMagicV6    = "IDEMCKP6" // no tally block
	partMagicV5    = "IDEMCKP5" // no packed bit
	partMagicV4    = "IDEMCKP4" // fixed 12-byte pointers only, no packed bit
	partMagicV3    = "IDEMCKP3" // no indirect bit
	partEndMagic   = "IDEMEND3"
	partHeaderMin  = 8 + 8 + 4 + 8
	partTrailerLen = 4 + 1 + 8 + 4 + 4 + 8

	legacyMagic     = "IDEMCKP2"
	legacyEndMagic  = "IDEMEND1"
	legacyHeaderLen = 8 + 8 + 8
	legacyFooterLen = 4 + 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// partPtrForms are the part magics this build reads, with the pointers
// their records may hold.
var partPtrForms = map[string]ptrForm{partMagic: ptrCompact, partMagicV6: ptrCompact, partMagicV5: ptrCompact, partMagicV4: ptrFixed, partMagicV3: ptrNone}

// genName names a generation in messages: the prefix its files share.
func genName(v0 store.Version) string { return fmt.Sprintf("%s%020d", ckptPrefix, v0) }

func partName(v0 store.Version, seq int) string {
	return fmt.Sprintf("%s-%06d%s", genName(v0), seq, ckptSuffix)
}

func legacyName(index store.Version) string { return genName(index) + ckptSuffix }

// partMeta is what a part's header and trailer say, read without its
// records.
type partMeta struct {
	name       string
	v0         store.Version
	seq        int
	version    store.Version
	start, end []byte
	last       bool
	count      uint64
	size       int64
	legacy     bool
	ptrs       ptrForm // the pointers its records may hold (none: no indirect bit)
	packed     bool    // its key lengths carry the packed bit
	tallied    bool    // a tally block follows its records
}

// generation is one checkpoint: its parts in order.
type generation struct {
	v0    store.Version
	parts []partMeta
}

// complete reports whether the parts cover the whole key space.
func (g generation) complete() bool {
	if len(g.parts) == 0 {
		return false
	}
	for i, p := range g.parts {
		if p.seq != i || (i == 0 && len(p.start) != 0) || (i > 0 && !bytes.Equal(p.start, g.parts[i-1].end)) {
			return false
		}
	}
	return g.parts[len(g.parts)-1].last
}

// resumable returns how many leading parts a resumed checkpoint can build
// on: contiguous from the start, the last of them not the last part.
func (g generation) resumable() int {
	n := 0
	for i, p := range g.parts {
		if p.seq != i || p.last || (i == 0 && len(p.start) != 0) || (i > 0 && !bytes.Equal(p.start, g.parts[i-1].end)) {
			break
		}
		n++
	}
	return n
}

func (g generation) bytes() int64 {
	var n int64
	for _, p := range g.parts {
		n += p.size
	}
	return n
}

// listGenerations returns the generations in dir, newest first, with the
// parts whose header or trailer cannot be read left out (they make their
// generation incomplete), and removes the temporary files of interrupted
// checkpoints.
func listGenerations(fsys vfs.FS, dir string) ([]generation, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	byV0 := map[store.Version]*generation{}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, ckptPrefix) {
			continue
		}
		if strings.HasSuffix(name, ckptTmpSuffix) {
			fsys.Remove(filepath.Join(dir, name)) // an interrupted checkpoint
			continue
		}
		var m partMeta
		if !strings.HasSuffix(name, ckptSuffix) {
			continue
		}
		if _, _, ok := parsePartName(name); ok {
			if m, err = readPartMeta(fsys, dir, name); err != nil {
				continue
			}
		} else {
			v, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, ckptPrefix), ckptSuffix), 10, 64)
			if err != nil {
				continue
			}
			m = partMeta{name: name, v0: store.Version(v), version: store.Version(v), last: true, legacy: true}
			if fi, err := e.Info(); err == nil {
				m.size = fi.Size()
			}
		}
		g := byV0[m.v0]
		if g == nil {
			g = &generation{v0: m.v0}
			byV0[m.v0] = g
		}
		g.parts = append(g.parts, m)
	}
	out := make([]generation, 0, len(byV0))
	for _, g := range byV0 {
		sort.Slice(g.parts, func(i, j int) bool { return g.parts[i].seq < g.parts[j].seq })
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].v0 > out[j].v0 })
	return out, nil
}

// parsePartName returns the v0 and seq a part's name gives.
func parsePartName(name string) (store.Version, int, bool) {
	rest := strings.TrimSuffix(strings.TrimPrefix(name, ckptPrefix), ckptSuffix)
	v, s, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, 0, false
	}
	v0, err1 := strconv.ParseUint(v, 10, 64)
	seq, err2 := strconv.Atoi(s)
	return store.Version(v0), seq, err1 == nil && err2 == nil && seq >= 0
}

// readPartMeta reads a part's header and trailer, not its records.
func readPartMeta(fsys vfs.FS, dir, name string) (partMeta, error) {
	v0, seq, ok := parsePartName(name)
	if !ok {
		return partMeta{}, errors.New("not a part name")
	}
	f, err := fsys.OpenFile(filepath.Join(dir, name), os.O_RDONLY, 0)
	if err != nil {
		return partMeta{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return partMeta{}, err
	}
	size := fi.Size()
	if size < partHeaderMin+1+partTrailerLen {
		return partMeta{}, errors.New("short part")
	}
	tail := make([]byte, min(size-partHeaderMin, partTrailerLen+store.KeyBytesMax))
	if _, err := f.ReadAt(tail, size-int64(len(tail))); err != nil {
		return partMeta{}, err
	}
	hdr := make([]byte, min(size, partHeaderMin+binary.MaxVarintLen64+store.KeyBytesMax))
	if _, err := f.ReadAt(hdr, 0); err != nil && !errors.Is(err, io.EOF) {
		return partMeta{}, err
	}
	m, err := partMetaOf(hdr, tail, size)
	if err != nil {
		return partMeta{}, err
	}
	if m.v0 != v0 || m.seq != seq {
		return partMeta{}, fmt.Errorf("header says part %d of %d, the name part %d of %d", m.seq, m.v0, seq, v0)
	}
	m.name = name
	return m, nil
}

// partMetaOf decodes a part's meta from the start of its image (hdr), the
// end of it (tail, at least the trailer) and its size.
func partMetaOf(hdr, tail []byte, size int64) (partMeta, error) {
	if len(tail) < partTrailerLen {
		return partMeta{}, errors.New("short part")
	}
	tr := tail[len(tail)-partTrailerLen:]
	endLen := int(binary.LittleEndian.Uint32(tr[0:]))
	if string(tr[partTrailerLen-8:]) != partEndMagic || endLen > len(tail)-partTrailerLen {
		return partMeta{}, errors.New("no trailer (incomplete write)")
	}
	end := tail[len(tail)-partTrailerLen-endLen : len(tail)-partTrailerLen]
	if binary.LittleEndian.Uint32(tr[17:]) != crc32.Update(crc32.Checksum(end, castagnoli), castagnoli, tr[:17]) {
		return partMeta{}, errors.New("trailer checksum mismatch")
	}
	m, _, err := parsePartHeader(hdr)
	if err != nil {
		return partMeta{}, err
	}
	m.size, m.end = size, append([]byte(nil), end...)
	m.last = tr[4] == 1
	m.count = binary.LittleEndian.Uint64(tr[5:])
	if m.last && len(end) != 0 {
		return partMeta{}, errors.New("a last part with an end key")
	}
	return m, nil
}

// parsePartHeader decodes a part's header and returns its length.
func parsePartHeader(b []byte) (partMeta, int, error) {
	if len(b) < partHeaderMin {
		return partMeta{}, 0, errors.New("bad magic")
	}
	ptrs, ok := partPtrForms[string(b[:8])]
	if !ok {
		return partMeta{}, 0, errors.New("bad magic")
	}
	m := partMeta{
		ptrs:    ptrs,
		packed:  string(b[:8]) == partMagic || string(b[:8]) == partMagicV6,
		tallied: string(b[:8]) == partMagic,
		v0:      store.Version(binary.LittleEndian.Uint64(b[8:])),
		seq:     int(binary.LittleEndian.Uint32(b[16:])),
		version: store.Version(binary.LittleEndian.Uint64(b[20:])),
	}
	n, k := binary.Uvarint(b[partHeaderMin:])
	if k <= 0 || n > store.KeyBytesMax || uint64(len(b)-partHeaderMin-k) < n {
		return partMeta{}, 0, errors.New("bad start key")
	}
	at := partHeaderMin + k
	m.start = append([]byte(nil), b[at:at+int(n)]...)
	if m.version < m.v0 {
		return partMeta{}, 0, errors.New("part older than its generation")
	}
	return m, at + int(n), nil
}

// decodePart validates a whole part image against its meta and calls fn
// for each record in order. Keys (key-only items of the stored key) and
// values alias data, the value right after its key.
func decodePart(data []byte, m partMeta, fn func(key index.KV, value []byte, version store.Version, indirect bool)) error {
	if m.legacy {
		at, err := decodeLegacy(data, fn)
		if err == nil && at != m.v0 {
			err = fmt.Errorf("header index %d does not match file name", at)
		}
		return err
	}
	recs, h, err := partBody(data, m)
	if err != nil {
		return err
	}
	// decodeRecords proves the keys strictly increase, so the range is
	// checked at its two ends only, not twice per record.
	var last index.KV
	var tally itemTally
	first := true
	n, err := decodeRecords(recs, m.count, m.version, h.ptrs, h.packed, func(k index.KV, v []byte, ver store.Version, indirect bool) error {
		if first {
			if first = false; k.CompareKey(index.Probe(m.start)) < 0 {
				return fmt.Errorf("key %q outside the part's range", k.Key())
			}
		}
		last = k
		if h.tallied {
			tally.countRecord(k.KeyLen(), v, indirect, 1)
		}
		fn(k, v, ver, indirect)
		return nil
	})
	if err != nil {
		return err
	}
	if !first && len(m.end) > 0 && last.CompareKey(index.Probe(m.end)) >= 0 {
		return fmt.Errorf("key %q outside the part's range", last.Key())
	}
	if h.tallied {
		return checkTallyBlock(recs[n:], &tally)
	}
	if n != len(recs) {
		return fmt.Errorf("%d trailing bytes", len(recs)-n)
	}
	return nil
}

// checkTallyBlock checks that b is a tally block (tallyblock.go) that
// sums to what the records, summed in want, do: an open takes it on the
// CRC's word.
func checkTallyBlock(b []byte, want *itemTally) error {
	var got itemTally
	if err := got.addBlock(b); err != nil {
		return err
	}
	if !got.equal(want) {
		return fmt.Errorf("the tally block says %d live bytes and %v in the value log, the records %d and %v",
			got.live, got.segSums(), want.live, want.segSums())
	}
	return nil
}

// decodeRecords decodes count records no newer than at, in strictly
// increasing key order, and returns how many bytes they took. ptrs says
// whether the value lengths carry the indirect bit, and the pointers'
// lengths; packed whether the key lengths carry the packed bit.
func decodeRecords(rest []byte, count uint64, at store.Version, ptrs ptrForm, packed bool, fn func(key index.KV, value []byte, version store.Version, indirect bool) error) (int, error) {
	total := len(rest)
	var prev index.KV
	for i := uint64(0); i < count; i++ {
		klen, n1 := binary.Uvarint(rest)
		if n1 <= 0 {
			return 0, fmt.Errorf("record %d: bad key length", i)
		}
		klen, _, kpacked, kok := storedKeyLen(klen, packed)
		if !kok {
			return 0, fmt.Errorf("record %d: a packed key of %d bytes", i, klen)
		}
		vlen, n2 := binary.Uvarint(rest[n1:])
		if n2 <= 0 {
			return 0, fmt.Errorf("record %d: bad value length", i)
		}
		indirect := false
		if ptrs != ptrNone {
			indirect, vlen = vlen&1 == 1, vlen>>1
			if indirect && !ptrs.lenOK(vlen) {
				return 0, fmt.Errorf("record %d: a value-log pointer of %d bytes", i, vlen)
			}
		}
		r := rest[n1+n2:]
		if klen == 0 || klen > uint64(len(r)) || vlen > uint64(len(r))-klen {
			return 0, fmt.Errorf("record %d: bad key or value", i)
		}
		// The key aliases its value and version: an item can be made of it.
		key, val := index.StoredProbe(r[:klen], kpacked), r[klen:klen+vlen:klen+vlen]
		r = r[klen+vlen:]
		ver, n := binary.Uvarint(r)
		if n <= 0 || ver == 0 || store.Version(ver) > at {
			return 0, fmt.Errorf("record %d: bad version", i)
		}
		if i > 0 && prev.CompareKey(key) >= 0 {
			return 0, fmt.Errorf("record %d: keys out of order", i)
		}
		prev = key
		rest = r[n:]
		if err := fn(key, val, store.Version(ver), indirect); err != nil {
			return 0, err
		}
	}
	return total - len(rest), nil
}

// storedKeyLen reads a record's key length field: the stored key's length,
// the raw key's and whether the key is packed (only a format with the
// packed bit, packedForm, says so), and false for a packed key too short
// to hold its 16 bytes.
func storedKeyLen(field uint64, packedForm bool) (stored, raw uint64, packed, ok bool) {
	if !packedForm || field&1 == 0 {
		if packedForm {
			field >>= 1
		}
		return field, field, false, true
	}
	stored = field >> 1
	return stored, stored + 16, true, index.PackedKeyOK(int(min(stored, 1<<20)))
}

// decodeLegacy validates an IDEMCKP2 checkpoint and calls fn for each record.
func decodeLegacy(data []byte, fn func(key index.KV, value []byte, version store.Version, indirect bool)) (store.Version, error) {
	if len(data) < legacyHeaderLen+legacyFooterLen {
		return 0, errors.New("short file")
	}
	if string(data[:8]) != legacyMagic {
		return 0, errors.New("bad magic")
	}
	body, ftr := data[:len(data)-legacyFooterLen], data[len(data)-legacyFooterLen:]
	if string(ftr[4:]) != legacyEndMagic {
		return 0, errors.New("missing end marker (incomplete write)")
	}
	if binary.LittleEndian.Uint32(ftr[:4]) != crc32.Checksum(body, castagnoli) {
		return 0, errors.New("checksum mismatch")
	}
	at := store.Version(binary.LittleEndian.Uint64(body[8:]))
	n, err := decodeRecords(body[legacyHeaderLen:], binary.LittleEndian.Uint64(body[16:]), at, ptrNone, false,
		func(k index.KV, v []byte, ver store.Version, _ bool) error { fn(k, v, ver, false); return nil })
	if err != nil {
		return 0, err
	}
	if n != len(body)-legacyHeaderLen {
		return 0, fmt.Errorf("%d trailing bytes", len(body)-legacyHeaderLen-n)
	}
	return at, nil
}

// partWriter streams one part: header, records, trailer.
type partWriter struct {
	w     io.Writer
	crc   hashWriter
	bw    *bufio.Writer
	count uint64
	bytes int
	buf   [3 * binary.MaxVarintLen64]byte
	key   []byte // the stored key's scratch
	// order refuses a key not above the one before: an open's load takes
	// the order on the CRC's word (partload.go), and its tally too.
	order keyOrder
	tally itemTally
}

type hashWriter interface {
	io.Writer
	Sum32() uint32
}

func newPartWriter(w io.Writer, v0 store.Version, seq int, version store.Version, start []byte) *partWriter {
	p := &partWriter{w: w, crc: crc32.New(castagnoli)}
	p.bw = bufio.NewWriterSize(io.MultiWriter(w, p.crc), 1<<20)
	var hdr [partHeaderMin]byte
	copy(hdr[:8], partMagic)
	binary.LittleEndian.PutUint64(hdr[8:], uint64(v0))
	binary.LittleEndian.PutUint32(hdr[16:], uint32(seq))
	binary.LittleEndian.PutUint64(hdr[20:], uint64(version))
	p.bw.Write(hdr[:])
	p.bw.Write(binary.AppendUvarint(p.buf[:0], uint64(len(start))))
	p.bw.Write(start)
	return p
}

// add writes one record of item's key (its value aside): val is the
// value, or with indirect its pointer.
func (p *partWriter) add(item index.KV, val []byte, version uint64, indirect bool) {
	p.order.next(item)
	p.tally.countRecord(item.KeyLen(), val, indirect, 1)
	var packed bool
	p.key, packed = item.AppendStoredKey(p.key[:0])
	n := binary.PutUvarint(p.buf[:], flaggedLen(len(p.key), packed))
	n += binary.PutUvarint(p.buf[n:], flaggedLen(len(val), indirect))
	p.bw.Write(p.buf[:n])
	p.bw.Write(p.key)
	p.bw.Write(val)
	p.bw.Write(p.buf[:binary.PutUvarint(p.buf[:], version)])
	p.count++
	p.bytes += n + len(p.key) + len(val)
}

// flaggedLen is a length with a flag in its low bit: a value's with the
// indirect bit, a key's with the packed bit.
func flaggedLen(n int, flag bool) uint64 {
	l := uint64(n) << 1
	if flag {
		l |= 1
	}
	return l
}

// finish writes the trailer: end is the first key of the next part (nil
// for the last part).
func (p *partWriter) finish(end []byte, last bool) error {
	if p.order.err != nil {
		return p.order.err
	}
	p.bw.Write(p.tally.appendBlock(p.key[:0]))
	if err := p.bw.Flush(); err != nil {
		return err
	}
	tr := make([]byte, 0, len(end)+partTrailerLen)
	tr = append(tr, end...)
	tr = binary.LittleEndian.AppendUint32(tr, uint32(len(end)))
	if last {
		tr = append(tr, 1)
	} else {
		tr = append(tr, 0)
	}
	tr = binary.LittleEndian.AppendUint64(tr, p.count)
	tr = binary.LittleEndian.AppendUint32(tr, p.crc.Sum32())
	tr = binary.LittleEndian.AppendUint32(tr, crc32.Checksum(tr, castagnoli))
	tr = append(tr, partEndMagic...)
	_, err := p.w.Write(tr)
	return err
}

// removeFiles removes a generation's files (best effort is not enough: an
// error is returned, and the next checkpoint tries again).
func removeFiles(fsys vfs.FS, dir string, names []string) error {
	for _, name := range names {
		if err := fsys.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
