package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemdb/idem/store"
)

// TestOpen_ReadsALegacySingleFileCheckpoint: a data dir written by an
// earlier version holds one ckpt-<index>.ckpt (IDEMCKP2) and the log after
// it; it opens with every key, and the next checkpoint supersedes it.
func TestOpen_ReadsALegacySingleFileCheckpoint(t *testing.T) {
	dir := t.TempDir()
	// Full checkpoints: a delta would keep the legacy file as its base.
	opts := quiet(Options{CheckpointLogBytes: -1, CheckpointDeltasMax: -1})
	db := openT(t, dir, opts)
	fillStore(t, db, 80)
	snap := db.Snapshot()
	state := fillStore(t, db, 20) // in the log after the legacy checkpoint
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// What the earlier version wrote for snap.
	var img bytes.Buffer
	var hdr [legacyHeaderLen]byte
	copy(hdr[:8], legacyMagic)
	binary.LittleEndian.PutUint64(hdr[8:], uint64(snap.Version()))
	binary.LittleEndian.PutUint64(hdr[16:], uint64(snap.Len()))
	img.Write(hdr[:])
	snap.Ascend(nil, func(it store.Item) bool {
		img.Write(binary.AppendUvarint(nil, uint64(len(it.Key))))
		img.Write(binary.AppendUvarint(nil, uint64(len(it.Value))))
		img.Write(it.Key)
		img.Write(it.Value)
		img.Write(binary.AppendUvarint(nil, uint64(it.Version)))
		return true
	})
	img.Write(binary.LittleEndian.AppendUint32(nil, crc32.Checksum(img.Bytes(), castagnoli)))
	img.WriteString(legacyEndMagic)
	if err := os.WriteFile(filepath.Join(dir, legacyName(snap.Version())), img.Bytes(), 0o640); err != nil {
		t.Fatal(err)
	}

	db = openT(t, dir, opts)
	if got := db.Stats().Recovery.FromCheckpoint; got != snap.Version() {
		t.Fatalf("recovered from %d, want the legacy checkpoint at %d", got, snap.Version())
	}
	sameState(t, "from the legacy checkpoint", scanAll(t, db), state)
	if _, err := db.Apply(context.Background(), new(store.Batch).Put([]byte("new"), []byte("x"))); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := db.Apply(context.Background(), new(store.Batch).Put([]byte(fmt.Sprint("n", snap.Len())), []byte("y"))); err != nil {
			t.Fatal(err)
		}
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	state = scanAll(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, legacyName(snap.Version()))); !os.IsNotExist(err) {
		t.Fatalf("the legacy checkpoint outlived two newer ones: %v", err)
	}
	db = openT(t, dir, opts)
	defer db.Close()
	sameState(t, "after newer checkpoints", scanAll(t, db), state)
}
