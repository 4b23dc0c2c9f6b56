package engine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
)

// Delta checkpoints (the chain: ckptchain.go).
//
// A delta holds, for every key written in the log after the previous link
// of its chain (prev) up to its own snapshot v, the key's value at v, or a
// tombstone if it was deleted. Loaded over the chain before it, it gives
// the store as of v exactly, and recovery replays the log from v + 1. A
// delta is written from one snapshot, as one file:
//
//	ckpt-<v>.delta
//	header   "IDEMDLT4" | v u64 | base u64 | prev u64
//	records  count × ( uvarint(len key << 1 | packed) | uvarint((len value << 1 | indirect) + 1, 0 for a
//	                   tombstone) | key
//	                   | value | uvarint(version), a put's only )
//
// (packed: the key is stored packed, and indirect: the value is a
// value-log pointer in either form, as in a part of format IDEMCKP6. A
// delta of format IDEMDLT3 has no packed bit; one of format IDEMDLT2 holds
// the fixed 12-byte pointer only; one of format IDEMDLT1, written before
// the value log, has no indirect bit either.)
//
//	trailer  count u64 | crc32c(header ‖ records ‖ count) u32 | "IDEMEND4"
//
// base names the generation the chain starts from. Keys strictly increase,
// and no put is newer than v. (A put may be older than prev: the keys
// noted are a superset of those written since the link — after an open,
// say, they are those written since the chain's tip before it.) The file is written to <name>.tmp, fsynced, renamed and the
// directory fsynced, as a part is.
const (
	deltaSuffix      = ".delta"
	deltaMagic       = "IDEMDLT4"
	deltaMagicV3     = "IDEMDLT3" // no packed bit
	deltaMagicV2     = "IDEMDLT2" // fixed 12-byte pointers only, no packed bit
	deltaMagicV1     = "IDEMDLT1" // no indirect bit
	deltaEndMagic    = "IDEMEND4"
	deltaHeaderLen   = 8 + 8 + 8 + 8
	deltaTrailerLen  = 8 + 4 + 8
	deltaTombstone   = 0
	deltaValueOffset = 1
)

// deltaPtrForms are the delta magics this build reads, with the pointers
// their records may hold.
var deltaPtrForms = map[string]ptrForm{deltaMagic: ptrCompact, deltaMagicV3: ptrCompact, deltaMagicV2: ptrFixed, deltaMagicV1: ptrNone}

func deltaName(v store.Version) string { return genName(v) + deltaSuffix }

// deltaMeta is what a delta's header and trailer say.
type deltaMeta struct {
	name          string
	v, base, prev store.Version
	count         uint64
	size          int64
	ptrs          ptrForm // the pointers its records may hold (none: no indirect bit)
	packed        bool    // its key lengths carry the packed bit
}

// parseDeltaName returns the version a delta's name gives.
func parseDeltaName(name string) (store.Version, bool) {
	rest, ok := strings.CutSuffix(strings.TrimPrefix(name, ckptPrefix), deltaSuffix)
	if !ok || len(rest) != 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(rest, 10, 64)
	return store.Version(v), err == nil && v > 0
}

// readDeltaMeta reads a delta's header and trailer, not its records.
func readDeltaMeta(fsys vfs.FS, dir, name string) (deltaMeta, error) {
	v, ok := parseDeltaName(name)
	if !ok {
		return deltaMeta{}, errors.New("not a delta name")
	}
	f, err := fsys.OpenFile(filepath.Join(dir, name), os.O_RDONLY, 0)
	if err != nil {
		return deltaMeta{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return deltaMeta{}, err
	}
	if fi.Size() < deltaHeaderLen+deltaTrailerLen {
		return deltaMeta{}, errors.New("short delta")
	}
	var hdr [deltaHeaderLen]byte
	var tr [deltaTrailerLen]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return deltaMeta{}, err
	}
	if _, err := f.ReadAt(tr[:], fi.Size()-deltaTrailerLen); err != nil {
		return deltaMeta{}, err
	}
	m, err := deltaMetaOf(hdr[:], tr[:], fi.Size())
	if err != nil {
		return deltaMeta{}, err
	}
	if m.v != v {
		return deltaMeta{}, fmt.Errorf("header says delta %d, the name %d", m.v, v)
	}
	m.name = name
	return m, nil
}

func deltaMetaOf(hdr, tr []byte, size int64) (deltaMeta, error) {
	ptrs, ok := deltaPtrForms[string(hdr[:8])]
	if !ok {
		return deltaMeta{}, errors.New("bad magic")
	}
	if string(tr[12:]) != deltaEndMagic {
		return deltaMeta{}, errors.New("no trailer (incomplete write)")
	}
	m := deltaMeta{
		v:      store.Version(binary.LittleEndian.Uint64(hdr[8:])),
		base:   store.Version(binary.LittleEndian.Uint64(hdr[16:])),
		prev:   store.Version(binary.LittleEndian.Uint64(hdr[24:])),
		count:  binary.LittleEndian.Uint64(tr[0:]),
		size:   size,
		ptrs:   ptrs,
		packed: string(hdr[:8]) == deltaMagic,
	}
	if m.prev < m.base || m.v <= m.prev {
		return deltaMeta{}, fmt.Errorf("links %d after %d on base %d: out of order", m.v, m.prev, m.base)
	}
	return m, nil
}

// decodeDelta validates a whole delta image against its meta and, if fn
// is not nil, calls it for each record in order (value nil and tombstone
// true for a deletion; indirect for a value-log pointer). Keys (key-only
// items of the stored key) and values alias data.
func decodeDelta(data []byte, m deltaMeta, fn func(key index.KV, value []byte, version store.Version, tombstone, indirect bool)) error {
	rest, err := deltaBody(data, m)
	if err != nil {
		return err
	}
	var prev index.KV
	for i := uint64(0); i < m.count; i++ {
		klen, n1 := binary.Uvarint(rest)
		if n1 <= 0 {
			return fmt.Errorf("record %d: bad key length", i)
		}
		klen, raw, kpacked, kok := storedKeyLen(klen, m.packed)
		vcode, n2 := binary.Uvarint(rest[n1:])
		if n2 <= 0 {
			return fmt.Errorf("record %d: bad value length", i)
		}
		r := rest[n1+n2:]
		tombstone, indirect, vlen := vcode == deltaTombstone, false, uint64(0)
		if !tombstone {
			vlen = vcode - deltaValueOffset
			if m.ptrs != ptrNone {
				indirect, vlen = vlen&1 == 1, vlen>>1
				if indirect && !m.ptrs.lenOK(vlen) {
					return fmt.Errorf("record %d: a value-log pointer of %d bytes", i, vlen)
				}
			}
		}
		if !kok || klen == 0 || raw > store.KeyBytesMax || klen > uint64(len(r)) || vlen > uint64(len(r))-klen {
			return fmt.Errorf("record %d: bad key or value", i)
		}
		key := index.StoredProbe(r[:klen], kpacked)
		if i > 0 && prev.CompareKey(key) >= 0 {
			return fmt.Errorf("record %d: keys out of order", i)
		}
		prev = key
		if tombstone {
			rest = r[klen:]
			if fn != nil {
				fn(key, nil, 0, true, false)
			}
			continue
		}
		val := r[klen : klen+vlen : klen+vlen]
		r = r[klen+vlen:]
		ver, n := binary.Uvarint(r)
		if n <= 0 || ver == 0 || store.Version(ver) > m.v {
			return fmt.Errorf("record %d: version %d outside (0, %d]", i, ver, m.v)
		}
		rest = r[n:]
		if fn != nil {
			fn(key, val, store.Version(ver), false, indirect)
		}
	}
	if len(rest) != 0 {
		return fmt.Errorf("%d trailing bytes", len(rest))
	}
	return nil
}

// deltaBody checks a delta image's size, header and CRC against its meta
// and returns its records' bytes.
func deltaBody(data []byte, m deltaMeta) ([]byte, error) {
	if int64(len(data)) != m.size {
		return nil, fmt.Errorf("%d bytes, %d when listed", len(data), m.size)
	}
	got, err := deltaMetaOf(data[:deltaHeaderLen], data[len(data)-deltaTrailerLen:], m.size)
	if err != nil {
		return nil, err
	}
	if got.v != m.v || got.base != m.base || got.prev != m.prev || got.count != m.count {
		return nil, errors.New("header changed since listed")
	}
	sumEnd := len(data) - deltaTrailerLen + 8
	if binary.LittleEndian.Uint32(data[sumEnd:]) != crc32.Checksum(data[:sumEnd], castagnoli) &&
		!fault.Planted(fault.BugCkptIgnoresCRC) { // planted only under -tags idem_selftest
		return nil, errors.New("checksum mismatch")
	}
	return data[deltaHeaderLen : len(data)-deltaTrailerLen], nil
}

// deltaWriter streams one delta: header, records, trailer.
type deltaWriter struct {
	w     io.Writer
	crc   hashWriter
	bw    *bufio.Writer
	count uint64
	buf   [3 * binary.MaxVarintLen64]byte
	key   []byte // the stored key's scratch
	// order refuses a key not above the one before: a load takes the
	// order on the CRC's word (deltaload.go).
	order keyOrder
}

func newDeltaWriter(w io.Writer, v, base, prev store.Version) *deltaWriter {
	d := &deltaWriter{w: w, crc: crc32.New(castagnoli)}
	d.bw = bufio.NewWriterSize(io.MultiWriter(w, d.crc), 1<<20)
	var hdr [deltaHeaderLen]byte
	copy(hdr[:8], deltaMagic)
	binary.LittleEndian.PutUint64(hdr[8:], uint64(v))
	binary.LittleEndian.PutUint64(hdr[16:], uint64(base))
	binary.LittleEndian.PutUint64(hdr[24:], uint64(prev))
	d.bw.Write(hdr[:])
	return d
}

// put writes one record of item's key (its value aside): value is the
// value, or with indirect its pointer.
func (d *deltaWriter) put(item index.KV, value []byte, version store.Version, indirect bool) {
	d.order.next(item)
	var packed bool
	d.key, packed = item.AppendStoredKey(d.key[:0])
	n := binary.PutUvarint(d.buf[:], flaggedLen(len(d.key), packed))
	n += binary.PutUvarint(d.buf[n:], flaggedLen(len(value), indirect)+deltaValueOffset)
	d.bw.Write(d.buf[:n])
	d.bw.Write(d.key)
	d.bw.Write(value)
	d.bw.Write(d.buf[:binary.PutUvarint(d.buf[:], uint64(version))])
	d.count++
}

func (d *deltaWriter) tombstone(key []byte) {
	d.order.nextCopy(key)
	var packed bool
	d.key, packed = index.AppendStoredKey(d.key[:0], key)
	n := binary.PutUvarint(d.buf[:], flaggedLen(len(d.key), packed))
	n += binary.PutUvarint(d.buf[n:], deltaTombstone)
	d.bw.Write(d.buf[:n])
	d.bw.Write(d.key)
	d.count++
}

func (d *deltaWriter) finish() error {
	if d.order.err != nil {
		return d.order.err
	}
	var cnt [8]byte
	binary.LittleEndian.PutUint64(cnt[:], d.count)
	d.bw.Write(cnt[:])
	if err := d.bw.Flush(); err != nil {
		return err
	}
	tr := binary.LittleEndian.AppendUint32(nil, d.crc.Sum32())
	tr = append(tr, deltaEndMagic...)
	_, err := d.w.Write(tr)
	return err
}
