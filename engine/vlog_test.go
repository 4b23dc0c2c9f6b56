package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// vlogOpts sends every value of "cold/" keys to the value log, in small
// segments, and checkpoints only when asked.
func vlogOpts() Options {
	return quiet(Options{CheckpointLogBytes: -1, ValueLogSegmentBytes: 4096,
		ColdValue: func(key, _ []byte) bool { return strings.HasPrefix(string(key), "cold/") }})
}

func putT(t *testing.T, db *DB, key, value string) {
	t.Helper()
	if _, err := db.Apply(context.Background(), new(store.Batch).Put([]byte(key), []byte(value))); err != nil {
		t.Fatal(err)
	}
}

func deleteT(t *testing.T, db *DB, key string) {
	t.Helper()
	if _, err := db.Apply(context.Background(), new(store.Batch).Delete([]byte(key))); err != nil {
		t.Fatal(err)
	}
}

// fillCold writes n cold keys of generation 0 and checkpoints: every value
// goes to the value log.
func fillCold(t *testing.T, db *DB, n int) {
	t.Helper()
	for i := range n {
		putT(t, db, fmt.Sprintf("cold/%04d", i), coldValue(i, 0))
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
}

// reopenSame closes db, reopens dir and checks it holds want.
func reopenSame(t *testing.T, db *DB, dir string, opts Options, want map[string]store.Item, what string) *DB {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openT(t, dir, opts)
	sameState(t, what, scanAll(t, db), want)
	return db
}

func coldValue(i, gen int) string {
	return fmt.Sprintf("terminal envelope %05d of generation %d, %s", i, gen, strings.Repeat("x", i%40))
}

// indirectKeys counts the tree's items whose values are in the value log.
func indirectKeys(db *DB) (indirect, inline int) {
	db.treeMu.RLock()
	defer db.treeMu.RUnlock()
	db.tree.AscendAll(func(it index.KV) bool {
		if it.Indirect() {
			indirect++
		} else {
			inline++
		}
		return true
	})
	return
}

// TestValueLog_ColdValuesLeaveRAMAtACheckpointAndReadBackTheSame: after a
// checkpoint the cold values are pointers in the tree, Get and Scan return
// exactly what was written, a reopen loads the pointers (not the values),
// and hot values never leave RAM.
func TestValueLog_ColdValuesLeaveRAMAtACheckpointAndReadBackTheSame(t *testing.T) {
	dir := t.TempDir()
	opts := vlogOpts()
	db := openT(t, dir, opts)
	for i := range 300 {
		putT(t, db, fmt.Sprintf("cold/%04d", i), coldValue(i, 0))
		if i%3 == 0 {
			putT(t, db, fmt.Sprintf("hot/%04d", i), coldValue(i, 0))
		}
	}
	want := scanAll(t, db)
	if ind, _ := indirectKeys(db); ind != 0 {
		t.Fatalf("%d values left RAM before any checkpoint", ind)
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if ind, inl := indirectKeys(db); ind != 300 || inl != 100 {
		t.Fatalf("after the checkpoint: %d indirect, %d inline; want 300 and 100", ind, inl)
	}
	sameState(t, "after the checkpoint", scanAll(t, db), want)
	vs := db.Stats().ValueLog
	if vs.Segments < 2 || vs.Live <= 0 || vs.Live > vs.Bytes || vs.Spilled != uint64(vs.Live) {
		t.Fatalf("value-log stats %+v: want several segments, every spilled byte live", vs)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openT(t, dir, opts)
	defer db.Close()
	if ind, _ := indirectKeys(db); ind != 300 {
		t.Fatalf("after reopen %d indirect items, want 300", ind)
	}
	sameState(t, "after reopen", scanAll(t, db), want)
	// A cold key written again is in RAM until the next checkpoint.
	putT(t, db, "cold/0001", "rewritten, in RAM for now")
	if it, err := db.Get(context.Background(), []byte("cold/0001")); err != nil || string(it.Value) != "rewritten, in RAM for now" {
		t.Fatalf("rewritten cold key: %q, %v", it.Value, err)
	}
}

// TestValueLog_AFlippedByteIsCorruptionNeverAValue: every byte of a
// record — checksum, lengths, key, value — is covered: a flipped one makes
// the read ErrCorruption naming the place, and never returns other bytes;
// a Scan's error names the key (DamagedKey), so a walk can step past it.
func TestValueLog_AFlippedByteIsCorruptionNeverAValue(t *testing.T) {
	dir := t.TempDir()
	opts := vlogOpts()
	opts.ValueLogSegmentBytes = 1 << 20
	db := openT(t, dir, opts)
	putT(t, db, "cold/a", coldValue(7, 0))
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, vlogDirName, vlogSegName(1))
	orig, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	for at := range orig {
		damaged := append([]byte(nil), orig...)
		damaged[at] ^= 0x10
		if err := os.WriteFile(seg, damaged, 0o640); err != nil {
			t.Fatal(err)
		}
		db := openT(t, dir, opts)
		it, err := db.Get(context.Background(), []byte("cold/a"))
		if !errors.Is(err, store.ErrCorruption) || !strings.Contains(err.Error(), vlogSegName(1)) {
			t.Fatalf("byte %d flipped: Get = %q, %v; want ErrCorruption naming the segment", at, it.Value, err)
		}
		_, err = db.Scan(context.Background(), []byte("cold/"), nil, 10)
		if k, ok := store.DamagedKey(err); !errors.Is(err, store.ErrCorruption) || !ok || string(k) != "cold/a" {
			t.Fatalf("byte %d flipped: Scan error %v (damaged key %q), want ErrCorruption naming cold/a", at, err, k)
		}
		db.Close()
	}
	// A short segment (truncated by an operator, a bad disk) is the same.
	if err := os.WriteFile(seg, orig[:len(orig)-1], 0o640); err != nil {
		t.Fatal(err)
	}
	db = openT(t, dir, opts)
	defer db.Close()
	if _, err := db.Get(context.Background(), []byte("cold/a")); !errors.Is(err, store.ErrCorruption) {
		t.Fatalf("truncated segment: %v, want ErrCorruption", err)
	}
}

// TestValueLog_TheCollectorReclaimsDeadSegmentsAndKeepsTheLiveValues:
// deleting and rewriting most cold keys leaves segments mostly dead; the
// collector copies what is live, and removes a segment only after two more
// checkpoint links; every value reads back the same, across a reopen, and
// the bytes it rewrote are counted.
func TestValueLog_TheCollectorReclaimsDeadSegmentsAndKeepsTheLiveValues(t *testing.T) {
	dir := t.TempDir()
	opts := vlogOpts()
	db := openT(t, dir, opts)
	fillCold(t, db, 400)
	first := db.vlog.ids()
	for i := range 400 {
		switch {
		case i%4 == 0: // a quarter stays live where it is
		case i%4 == 1:
			deleteT(t, db, fmt.Sprintf("cold/%04d", i))
		default:
			putT(t, db, fmt.Sprintf("cold/%04d", i), coldValue(i, 1))
		}
	}
	want := scanAll(t, db)
	// The checkpoint spills generation 1, then collects the emptiest two
	// segments of generation 0; each further one collects two more, and
	// removes what was retired once two links and the merges into the
	// base and fallback reached past them.
	for range 12 {
		putT(t, db, "hot/tick", "x") // a checkpoint needs something new
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		if err := db.merges.mergeAll(); err != nil {
			t.Fatal(err)
		}
		got := scanAll(t, db)
		delete(got, "hot/tick")
		sameState(t, "while collecting", got, want)
	}
	vs := db.Stats().ValueLog
	if vs.Collected == 0 || vs.Relocated == 0 {
		t.Fatalf("value-log stats %+v: want segments collected and live records relocated", vs)
	}
	left := map[uint32]bool{}
	for _, id := range db.vlog.ids() {
		left[id] = true
	}
	removed := 0
	for _, id := range first {
		if !left[id] {
			removed++
		}
	}
	if removed == 0 {
		t.Fatalf("no segment of the first checkpoint was removed (segments %v, stats %+v)", db.vlog.ids(), vs)
	}
	db.treeMu.RLock()
	for id, live := range db.vlogLive {
		if size := db.vlog.size(id); live < 0 || live > size {
			t.Errorf("segment %d: %d live bytes of %d", id, live, size)
		}
	}
	db.treeMu.RUnlock()
	wa := float64(vs.Spilled+vs.Relocated) / float64(vs.Spilled)
	t.Logf("value log: %+v, write amplification %.2f", vs, wa)
	if wa >= 2 {
		t.Errorf("write amplification %.2f: the collector rewrote more than it spilled", wa)
	}
	putT(t, db, "hot/tick", "y")
	db = reopenSame(t, db, dir, opts, scanAll(t, db), "after reopen")
	db.Close()
}

// TestValueLog_TheFallbackChainStillFindsItsValues: the collector has moved
// values and the newest checkpoint link is then damaged; the open falls
// back to the link before it, whose pointers lead to the old segment —
// still there, because a segment outlives two links.
func TestValueLog_TheFallbackChainStillFindsItsValues(t *testing.T) {
	dir := t.TempDir()
	opts := vlogOpts()
	db := openT(t, dir, opts)
	fillCold(t, db, 200)
	for i := range 200 {
		if i%5 != 0 {
			deleteT(t, db, fmt.Sprintf("cold/%04d", i))
		}
	}
	for range 2 { // the first collects and retires; the second links the moves
		putT(t, db, "hot/tick", "x")
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	if db.Stats().ValueLog.Relocated == 0 {
		t.Fatal("nothing relocated: the test needs the collector to have moved values")
	}
	want := scanAll(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Damage the newest link: the open must fall back.
	newest := ""
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), deltaSuffix) || strings.HasSuffix(e.Name(), ckptSuffix) {
			if e.Name() > newest {
				newest = e.Name()
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, newest))
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(filepath.Join(dir, newest), data, 0o640); err != nil {
		t.Fatal(err)
	}
	db = openT(t, dir, opts)
	defer db.Close()
	sameState(t, "from the fallback link", scanAll(t, db), want)
}

// TestOpen_ReadsCheckpointsFromBeforeTheValueLog: a data dir written by
// the previous format (a base part IDEMCKP3, a delta IDEMDLT1, a log tail;
// testdata/v3-dir, made by the commit before the value log) opens with
// every key as it was, and a checkpoint over it moves its cold values out.
func TestOpen_ReadsCheckpointsFromBeforeTheValueLog(t *testing.T) {
	dir, state := copyFixture(t, "testdata/v3-dir")
	check := func(what string, db *DB) { t.Helper(); checkState(t, what, db, state) }
	opts := quiet(Options{CheckpointLogBytes: -1, ColdValue: func(_, v []byte) bool { return true }})
	db := openT(t, dir, opts)
	if db.Stats().Recovery.FromCheckpoint == 0 {
		t.Fatal("the old checkpoint was not used")
	}
	check("as written before the value log", db)
	putT(t, db, "k999", "new") // something for a new link
	state["k999"] = fmt.Sprintf("%d new", db.Stats().Applied)
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if ind, _ := indirectKeys(db); ind == 0 {
		t.Fatal("no value left RAM at the first checkpoint in the new format")
	}
	db.Close()
	db = openT(t, dir, opts)
	defer db.Close()
	check("after a checkpoint in the new format", db)
}

// TestValueLog_MovedPointersReachTheNextLinkAfterASkippedCheckpoint: the
// collector's moves change no version, so a checkpoint right after them
// may find nothing new to write and skip; the moves must still reach the
// next link that is written — here a delta after a skipped one, then
// merges into new bases — or the segment they left would be removed under
// the chain's old pointers.
func TestValueLog_MovedPointersReachTheNextLinkAfterASkippedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	opts := vlogOpts()
	db := openT(t, dir, opts)
	fillCold(t, db, 400) // the base: every value spilled
	for i := range 400 {
		if i%8 != 0 {
			deleteT(t, db, fmt.Sprintf("cold/%04d", i))
		}
	}
	for i := range 50 { // large new values, in RAM until the next checkpoint
		putT(t, db, fmt.Sprintf("cold/new-%02d", i), strings.Repeat("n", 400))
	}
	// A delta, which moves the new values out: the chain then outweighs
	// twice the live data, so a merge is due. The collector moves the live
	// eighth out of the emptied segments.
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if db.Stats().ValueLog.Relocated == 0 {
		t.Fatal("nothing relocated: the test needs moved values")
	}
	if err := db.Checkpoint(); err != nil { // nothing new since the tip: skipped
		t.Fatal(err)
	}
	// Live data grows until deltas are due again; four more links.
	for round := range 4 {
		for i := range 50 {
			putT(t, db, fmt.Sprintf("hot/%d-%02d", round, i), strings.Repeat("h", 400))
		}
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		if err := db.merges.mergeAll(); err != nil {
			t.Fatal(err)
		}
	}
	db = reopenSame(t, db, dir, opts, scanAll(t, db), "after reopen")
	db.Close()
}

// TestValueLog_CheckpointsNeverRewriteIt: once a value is in the value
// log, later checkpoints — full rewrites of the store here, the most a
// checkpoint ever writes — carry its pointer, and the value log does not
// grow by a byte.
func TestValueLog_CheckpointsNeverRewriteIt(t *testing.T) {
	dir := t.TempDir()
	opts := vlogOpts()
	opts.CheckpointDeltasMax = -1 // every checkpoint a new base
	db := openT(t, dir, opts)
	defer db.Close()
	fillCold(t, db, 300)
	spilled := db.Stats().ValueLog
	for i := range 3 {
		putT(t, db, fmt.Sprintf("hot/%d", i), "x")
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		if vs := db.Stats().ValueLog; vs.Bytes != spilled.Bytes || vs.Spilled != spilled.Spilled || vs.Segments != spilled.Segments {
			t.Fatalf("base %d after the spill: value log %+v, was %+v", i+1, vs, spilled)
		}
	}
	if ind, _ := indirectKeys(db); ind != 300 {
		t.Fatalf("%d values in the value log after the rewrites, want 300", ind)
	}
}

// TestValueLog_TheCollectorMovesPastADamagedRecordAndKeepsItsSegment: a
// segment mostly dead holds a damaged record the tree still points at.
// The collector moves the live records after it too, leaves the damaged
// one where it is — still ErrCorruption, never another value — keeps the
// segment, and does not pick it again.
func TestValueLog_TheCollectorMovesPastADamagedRecordAndKeepsItsSegment(t *testing.T) {
	dir := t.TempDir()
	opts := vlogOpts()
	db := openT(t, dir, opts)
	defer func() { db.Close() }()
	fillCold(t, db, 400)
	ptrOf := func(key string) vlogPtr {
		t.Helper()
		db.treeMu.RLock()
		it, ok := db.tree.Get(index.Probe([]byte(key)))
		db.treeMu.RUnlock()
		if !ok || !it.Indirect() {
			t.Fatalf("%s is not in the value log", key)
		}
		p, err := decodeVlogPtr(it.Value())
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The keys of the second segment, in the order they were written.
	seg := ptrOf("cold/0000").seg + 1
	var keys []string
	for i := range 400 {
		if k := fmt.Sprintf("cold/%04d", i); ptrOf(k).seg == seg {
			keys = append(keys, k)
		}
	}
	if len(keys) < 8 {
		t.Fatalf("segment %d holds %d keys; want at least 8", seg, len(keys))
	}
	damaged, after := keys[1], []string{keys[len(keys)-2], keys[len(keys)-1]}
	p := ptrOf(damaged)
	f, err := os.OpenFile(filepath.Join(dir, vlogDirName, vlogSegName(seg)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	at := int64(p.off + p.n - 2) // a byte of the value
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x01
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// All but the damaged record and the last two die: the segment is
	// mostly dead, so the collector takes it.
	for _, k := range keys {
		if k != damaged && k != after[0] && k != after[1] {
			deleteT(t, db, k)
		}
	}
	for range 6 {
		putT(t, db, "hot/tick", "x")
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range after {
		if ptrOf(k).seg == seg {
			t.Fatalf("%s, after the damaged record, was not moved out of segment %d", k, seg)
		}
		i := 0
		fmt.Sscanf(k, "cold/%04d", &i)
		if it, err := db.Get(context.Background(), []byte(k)); err != nil || string(it.Value) != coldValue(i, 0) {
			t.Fatalf("%s after the move: %q %v", k, it.Value, err)
		}
	}
	if ptrOf(damaged).seg != seg {
		t.Fatalf("the damaged record moved")
	}
	if it, err := db.Get(context.Background(), []byte(damaged)); !errors.Is(err, store.ErrCorruption) {
		t.Fatalf("the damaged record reads %q, %v; want ErrCorruption", it.Value, err)
	}
	if db.vlog.size(seg) == 0 || !db.gc.held[seg] {
		t.Fatalf("segment %d: size %d, held %v; want kept and held", seg, db.vlog.size(seg), db.gc.held[seg])
	}
	for _, id := range db.gc.gcVictims() {
		if id == seg {
			t.Fatalf("segment %d is picked again", seg)
		}
	}
}
