package harness

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing/synctest"
	"time"

	"github.com/idemdb/idem/engine/check"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/vfs/memfs"
)

// Value-log damage (vlog-damage). A checkpoint moves terminal receipts out
// of RAM into the value log (engine/vlog.go): one record each,
//
//	crc32c(rest) u32 | uvarint(len key) | uvarint(len value) | key | value
//
// in vlog/<10 digits>.vlog, and the tree keeps a pointer to it. A disk that
// silently flips a byte of one must make that one receipt unreadable — an
// error wrapping store.ErrCorruption that names the segment and offset —
// and nothing more: never another envelope, never an absent receipt (a
// retry must not run the batch again), no other key changed, and the
// cleaner, which cannot load it, leaves it. Restored from a backup, the
// receipt is exactly what it was.

// vlogFlipMask is what the damage xors into one byte: a letter of the
// envelope's outcome stays a letter (flipOffset), so the record still
// decodes, into another envelope — only the checksum tells.
const vlogFlipMask = 0x01

// vlogRecord is one intact record of a value-log segment, read from its file.
type vlogRecord struct {
	path, seg  string // the segment file, and its name
	off        int64  // the record's offset in the segment
	valueAt    int64  // its value's
	key, value []byte
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// vlogRecords reads the records of every value-log segment in fsys, oldest
// segment first, each up to its first record that does not read whole (a
// crashed process's torn tail).
func vlogRecords(fsys vfs.FS) []vlogRecord {
	dir := filepath.Join(dataDir, "vlog")
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil
	}
	var names []string
	for _, de := range entries {
		if strings.HasSuffix(de.Name(), ".vlog") {
			names = append(names, de.Name())
		}
	}
	slices.Sort(names) // zero-padded: oldest first
	var out []vlogRecord
	for _, name := range names {
		path := filepath.Join(dir, name)
		data, err := vfs.ReadFile(fsys, path)
		if err != nil {
			continue
		}
		for off := 0; len(data)-off >= 6; {
			rec := data[off:]
			klen, n1 := binary.Uvarint(rec[4:])
			if n1 <= 0 {
				break
			}
			vlen, n2 := binary.Uvarint(rec[4+n1:])
			hdr := 4 + n1 + max(n2, 0)
			if n2 <= 0 || klen > uint64(len(rec)-hdr) || vlen > uint64(len(rec)-hdr)-klen {
				break
			}
			n, kend := hdr+int(klen+vlen), hdr+int(klen)
			if binary.LittleEndian.Uint32(rec) != crc32.Checksum(rec[4:n], castagnoli) {
				break
			}
			out = append(out, vlogRecord{path: path, seg: name, off: int64(off), valueAt: int64(off + kend),
				key: rec[hdr:kend], value: rec[kend:n]})
			off += n
		}
	}
	return out
}

// xorByte xors the byte at off of the file at path with mask, durably:
// twice leaves the file as it was.
func xorByte(fsys vfs.FS, path string, off int64, mask byte) error {
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		return err
	}
	b[0] ^= mask
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		return err
	}
	return f.Sync()
}

// flipOffset is where in a terminal receipt's value the damage goes: the
// last letter of its envelope's outcome (a CBOR text string, once in the
// record); the middle byte if it has none.
func flipOffset(value []byte, rec *receipt.Record) int {
	if rec.Envelope != nil {
		if o := rec.Envelope.Outcome; len(o) > 0 && len(o) < 24 {
			if at := bytes.Index(value, append([]byte{0x60 | byte(len(o))}, o...)); at >= 0 {
				return at + len(o)
			}
		}
	}
	return len(value) / 2
}

// describeReceipt shows a receipt's value by its envelope.
func describeReceipt(value []byte) string {
	rec, err := receipt.DecodeRecord(value)
	if err != nil || rec.Envelope == nil {
		return fmt.Sprintf("%d bytes that are no terminal receipt (%v)", len(value), err)
	}
	return "the envelope " + envString(receipt.EnvelopeOf(rec, ""))
}

// vlogDamage is the damage vlog-damage made.
type vlogDamage struct {
	k      int
	kg     keyGen
	key    []byte
	item   store.Item // as the store had it
	rec    *receipt.Record
	at     vlogRecord
	byteAt int64 // the flipped byte, in the segment
}

// damageValueLog: with nothing in flight, a checkpoint moves the settled
// terminal receipts to the value log; then one byte of the record of one
// keyed request's receipt flips in its segment, under the running store
// (memfs: every open handle reads the same bytes). While the damage lasts:
//
//   - a read of the receipt fails with ErrCorruption naming the segment
//     and offset, and so does a scan that meets it — it never skips it;
//   - every other key reads exactly as before;
//   - check.Dir, on a copy of the data dir (it refuses a running
//     store's, as idemctl check does), names the record as damage, and
//     nothing else;
//   - a retry of the request — with nothing else acting (sim.hold) —
//     fails with ErrCorruption (the API's 500), gets no answer, and writes
//     nothing;
//   - the cleaner, run once the receipt's retention has ended, leaves the
//     receipt it cannot load (checkCleaned judges what it deleted).
//
// Then the byte is restored, as an operator restores the file from a
// backup: the receipt reads back exactly as it was, version and all, and
// a retry replays its envelope.
func (sc *scenario) damageValueLog(e *event) {
	if sc.cl.health() != nil || len(sc.cl.live()) == 0 {
		sc.count("vlog-damage-idle")
		return
	}
	sc.sim.settle(actorTimeMax)
	if err := sc.cl.db.Checkpoint(); err != nil {
		sc.count("vlog-damage-idle")
		return
	}
	synctest.Wait() // whatever the checkpoint woke has finished
	want, err := sc.everything()
	if err != nil {
		sc.violate("before the value-log damage: " + err.Error())
		return
	}
	d := sc.damageReceipt(e.Other, want)
	if d == nil {
		sc.count("vlog-damage-idle")
		return
	}
	sc.damaged = d.key
	sc.whileDamaged(e, d, want)
	sc.damaged = nil
	if err := xorByte(sc.cl.disk.FS(), d.at.path, d.byteAt, vlogFlipMask); err != nil {
		sc.violate(fmt.Sprintf("vlog-damage: restore %s: %v", d.at.seg, err))
		return
	}
	sc.recoverStore()
	got, err := sc.cl.store.Get(context.Background(), d.key)
	if err != nil || !bytes.Equal(got.Value, d.item.Value) || got.Version != d.item.Version {
		sc.violate(fmt.Sprintf("vlog-damage: %s, its value-log record restored, reads %s at version %d (%v); was %s at %d",
			d.key, describeReceipt(got.Value), got.Version, err, describeReceipt(d.item.Value), d.item.Version))
		return
	}
	ans, err := sc.retryDamaged(e, d)
	first := sc.obs.settled[d.kg].env
	if err != nil || !ans.Terminal || envString(ans.Envelope) != first {
		sc.violate(fmt.Sprintf("vlog-damage: key %d gen %d, its receipt restored, answered %s (terminal %v, %v); want the replay of %s",
			d.k, d.kg.gen, envString(ans.Envelope), ans.Terminal, err, first))
		return
	}
	sc.count("vlog-damage-restored")
}

// damageReceipt flips a byte of the value-log record of a settled keyed
// request's receipt — terminal, no debt: one the cleaner would delete
// once its retention ends — the pick-th candidate (or the first after it
// that has a record), and returns the damage; nil if none is in the value
// log (or the damage was not reported as it must be: a violation).
func (sc *scenario) damageReceipt(pick int, items []store.Item) *vlogDamage {
	byKey := map[string]store.Item{}
	for _, it := range items {
		byKey[string(it.Key)] = it
	}
	var cands []*vlogDamage
	for k := range sc.gens {
		kg := keyGen{k, sc.gens[k]}
		if _, ok := sc.obs.settled[kg]; !ok || !sc.sent[k] || sc.tombs[k] != nil {
			continue
		}
		it, ok := byKey[string(receiptKey(k))]
		if !ok {
			continue
		}
		if rec, err := receipt.DecodeRecord(it.Value); err == nil && rec.State == receipt.Terminal && rec.Debt == 0 {
			cands = append(cands, &vlogDamage{k: k, kg: kg, key: it.Key, item: it, rec: rec})
		}
	}
	fsys := sc.cl.disk.FS()
	recs := vlogRecords(fsys)
	ctx := context.Background()
	for i := range cands {
		d := cands[(pick+i)%len(cands)]
		// Newest first: the collector copies live records forward, and
		// leaves the old copies as garbage no pointer reaches.
		for j := len(recs) - 1; j >= 0; j-- {
			r := recs[j]
			if !bytes.Equal(r.key, d.key) || !bytes.Equal(r.value, d.item.Value) {
				continue
			}
			d.at, d.byteAt = r, r.valueAt+int64(flipOffset(r.value, d.rec))
			if err := xorByte(fsys, r.path, d.byteAt, vlogFlipMask); err != nil {
				sc.violate(fmt.Sprintf("vlog-damage: flip a byte of %s: %v", r.seg, err))
				return nil
			}
			got, err := sc.cl.store.Get(ctx, d.key)
			switch {
			case errors.Is(err, store.ErrCorruption) && strings.Contains(err.Error(), r.seg) &&
				strings.Contains(err.Error(), strconv.FormatInt(r.off, 10)):
				return d
			case err == nil && bytes.Equal(got.Value, d.item.Value):
				// A copy the store does not read: undo, try the next.
				if err := xorByte(fsys, r.path, d.byteAt, vlogFlipMask); err != nil {
					sc.violate(fmt.Sprintf("vlog-damage: restore %s: %v", r.seg, err))
					return nil
				}
				continue
			case err == nil:
				sc.violate(fmt.Sprintf("vlog-damage: with a byte of its value-log record (%s at %d) flipped, %s read as %s; was %s: damage served as a value",
					r.seg, r.off, d.key, describeReceipt(got.Value), describeReceipt(d.item.Value)))
				return d // the record the store reads: the checks go on
			default:
				sc.violate(fmt.Sprintf("vlog-damage: with a byte of its value-log record (%s at %d) flipped, a read of %s failed with %v; want ErrCorruption naming the segment and offset",
					r.seg, r.off, d.key, err))
			}
			_ = xorByte(fsys, r.path, d.byteAt, vlogFlipMask)
			return nil
		}
	}
	return nil
}

// whileDamaged checks the store while d lasts (damageValueLog).
func (sc *scenario) whileDamaged(e *event, d *vlogDamage, want []store.Item) {
	where := fmt.Sprintf("%s's value-log record (%s at %d) damaged", d.key, d.at.seg, d.at.off)
	others := slices.DeleteFunc(slices.Clone(want), func(it store.Item) bool { return bytes.Equal(it.Key, d.key) })
	if _, err := sc.everything(); !errors.Is(err, store.ErrCorruption) {
		sc.violate(fmt.Sprintf("vlog-damage: with %s, a scan of the whole store returned %v; want ErrCorruption", where, err))
	}
	if got, err := sc.scanRange([]byte{}, []byte{0xff}, d.key); err != nil {
		sc.violate(fmt.Sprintf("vlog-damage: with %s, a scan of every other key: %v", where, err))
	} else if diff := diffItems(others, got); diff != "" {
		sc.violate(fmt.Sprintf("vlog-damage: with %s, other keys changed: %s", where, diff))
	}
	sc.checkDamagedCopy(d, where)

	// The retry: nothing but it acts, so the store after it is what it did.
	ans, err := sc.retryDamaged(e, d)
	switch {
	case err == nil && ans.Terminal:
		sc.violate(fmt.Sprintf("vlog-damage: with %s, a retry of key %d gen %d was answered %s (the first answer: %s); want an error wrapping ErrCorruption (a 500), never an answer",
			where, d.k, d.kg.gen, envString(ans.Envelope), sc.obs.settled[d.kg].env))
	case err == nil:
		sc.violate(fmt.Sprintf("vlog-damage: with %s, a retry of key %d gen %d was answered %d %s, not terminal; want an error wrapping ErrCorruption (a 500), never an answer",
			where, d.k, d.kg.gen, ans.Status, ans.Code))
	case !errors.Is(err, store.ErrCorruption):
		sc.violate(fmt.Sprintf("vlog-damage: with %s, a retry of key %d gen %d failed with %v; want ErrCorruption", where, d.k, d.kg.gen, err))
	}
	if got, err := sc.scanRange([]byte{}, []byte{0xff}, d.key); err != nil {
		sc.violate(fmt.Sprintf("vlog-damage: with %s, a scan after the retry: %v", where, err))
	} else if diff := diffItems(others, got); diff != "" {
		sc.violate(fmt.Sprintf("vlog-damage: with %s, a retry of its request wrote: %s", where, diff))
	}
	if sc.failed() {
		return
	}

	// The cleaner meets the receipt past its retention: it cannot load
	// it, and must leave it.
	if until := time.UnixMilli(d.rec.RetainUntil); until.After(time.Now()) {
		sc.advance(time.Until(until) + time.Second)
	}
	sc.clean(e.Node)
	switch _, err := sc.cl.store.Get(context.Background(), d.key); {
	case errors.Is(err, store.ErrNotFound):
		sc.violate(fmt.Sprintf("vlog-damage: the cleaner deleted receipt %s, which it could not read (%s)", d.key, where))
	case !errors.Is(err, store.ErrCorruption):
		sc.violate(fmt.Sprintf("vlog-damage: after the cleaner ran, %s reads %v; want ErrCorruption (%s)", d.key, err, where))
	}
}

// retryDamaged sends d's request again (the same batch, its generation's)
// through a live node, recorded, with the nodes' timers held: nothing else
// acts meanwhile.
func (sc *scenario) retryDamaged(e *event, d *vlogDamage) (receipt.Answer, error) {
	live := sc.cl.live()
	if len(live) == 0 {
		return receipt.Answer{}, errors.New("no node is up")
	}
	n := sc.cl.nodes[live[e.Node%len(live)]]
	cl := &client{slot: -1, id: sc.rec.newClient()}
	sc.trace = append(sc.trace, fmt.Sprintf("step %d: vlog-damage batch %s via %s", sc.stepNo, keyName(d.k), n.id))
	var ans receipt.Answer
	err := errors.New("did not finish")
	sc.sim.settle(actorTimeMax)
	sc.sim.hold(true)
	sc.perform("vlog-damage-retry", func(ctx context.Context) { ans, err = sc.batchOp(ctx, cl, n, d.k, 0, false) })
	sc.sim.hold(false)
	return ans, err
}

// checkDamagedCopy runs check.Dir on a copy of the data dir with d in
// it: it must name d's record as damage, and report no other.
func (sc *scenario) checkDamagedCopy(d *vlogDamage, where string) {
	cp, err := copyTree(sc.cl.disk.FS(), dataDir)
	if err != nil {
		sc.violate("vlog-damage: copy the data dir: " + err.Error())
		return
	}
	rep, err := check.Dir(cp, dataDir, check.Options{})
	if err != nil {
		sc.violate(fmt.Sprintf("vlog-damage: check.Dir with %s: %v", where, err))
		return
	}
	file := filepath.Join("vlog", d.at.seg)
	named := false
	var other []string
	for _, p := range rep.Problems {
		switch {
		case p.Kind != check.ProblemDamage:
		case p.File == file && p.Offset == d.at.off:
			named = true
		default:
			other = append(other, fmt.Sprintf("%s at %d: %s", p.File, p.Offset, p.Detail))
		}
	}
	if !named || len(other) > 0 || rep.ValueLog.Damaged != 1 {
		sc.violate(fmt.Sprintf("vlog-damage: check.Dir with %s: named it %v, %d damaged values, other damage %q",
			where, named, rep.ValueLog.Damaged, other))
	}
}

// copyTree copies dir of src, every file as it is now, to a new file
// system: an operator's copy of a running store's data dir.
func copyTree(src vfs.FS, dir string) (*memfs.FS, error) {
	dst := memfs.New()
	var walk func(dir string) error
	walk = func(dir string) error {
		if err := dst.MkdirAll(dir, 0o750); err != nil {
			return err
		}
		entries, err := src.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, de := range entries {
			path := filepath.Join(dir, de.Name())
			if de.IsDir() {
				if err := walk(path); err != nil {
					return err
				}
				continue
			}
			data, err := vfs.ReadFile(src, path)
			if err != nil {
				return err
			}
			f, err := dst.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
			if err != nil {
				return err
			}
			_, err = f.Write(data)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	return dst, walk(dir)
}
