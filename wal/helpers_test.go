package wal

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/vfs/errorfs"
	"github.com/idemdb/idem/vfs/memfs"
)

// Shared helpers of the wal tests.

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

func quiet(o Options) Options {
	if o.Logger == nil {
		o.Logger = quietLogger
	}
	return o
}

func openLogT(t *testing.T, dir string, opts Options) (*Log, RepairReport) {
	t.Helper()
	l, rep, err := Open(dir, quiet(opts))
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return l, rep
}

// body returns the body the tests write for entry index i.
func body(i uint64) []byte {
	return []byte(fmt.Sprintf("entry-%05d-%s", i, strings.Repeat("p", int(i%17))))
}

// appendSync appends one entry and waits until it is durable.
func appendSync(t *testing.T, l *Log, b []byte) uint64 {
	t.Helper()
	ctx := context.Background()
	if err := l.Reserve(ctx); err != nil {
		t.Fatalf("reserve: %v", err)
	}
	idx, c, err := l.Enqueue(KindBatch, b, nil)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	if err := c.Wait(ctx); err != nil {
		t.Fatalf("wait %d: %v", idx, err)
	}
	return idx
}

// replayAll opens dir and replays everything; it returns the bodies in
// order, the repair report and the first error of Open or Replay.
func replayAll(t *testing.T, dir string, opts Options) ([]string, RepairReport, error) {
	t.Helper()
	l, rep, err := Open(dir, quiet(opts))
	if err != nil {
		return nil, rep, err
	}
	defer l.Close()
	var out []string
	err = l.Replay(1, func(index uint64, kind Kind, b []byte) error {
		if want := uint64(len(out) + 1); index != want {
			return fmt.Errorf("replayed index %d, want %d", index, want)
		}
		if kind != KindBatch {
			return fmt.Errorf("entry %d has kind %d", index, kind)
		}
		out = append(out, string(b))
		return nil
	})
	if err == nil && l.NextIndex() != uint64(len(out)+1) {
		err = fmt.Errorf("next index %d after replaying %d entries", l.NextIndex(), len(out))
	}
	return out, rep, err
}

// checkBodies asserts that got holds exactly body(1..n).
func checkBodies(t *testing.T, got []string, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("replayed %d entries, want %d", len(got), n)
	}
	for i, b := range got {
		if want := string(body(uint64(i + 1))); b != want {
			t.Fatalf("entry %d = %q, want %q", i+1, b, want)
		}
	}
}

// span locates one tidwall entry in a segment: the uvarint length starts at
// start, the frame occupies [frame, end).
type span struct{ start, frame, end int }

func spansOf(t *testing.T, data []byte) []span {
	t.Helper()
	var out []span
	for pos := 0; pos < len(data); {
		if data[pos] == 0 && isZero(data[pos:]) {
			break // a preallocated segment's fill
		}
		size, n := binary.Uvarint(data[pos:])
		if n <= 0 || uint64(len(data)-pos-n) < size {
			t.Fatalf("segment does not parse at offset %d", pos)
		}
		out = append(out, span{start: pos, frame: pos + n, end: pos + n + int(size)})
		pos += n + int(size)
	}
	return out
}

// memDisk is a log directory on a crashable in-memory disk (vfs/memfs),
// opened through an error-injecting layer (vfs/errorfs) whose rules a test
// arms. A crash keeps exactly what was fsynced, whatever the log believes.
type memDisk struct {
	fs  *memfs.FS
	efs *errorfs.FS // of the latest open
}

const memDir = "/data/wal"

func newMemDisk() *memDisk { return &memDisk{fs: memfs.New()} }

func (d *memDisk) open(opts Options) (*Log, RepairReport, error) {
	d.efs = errorfs.Wrap(d.fs)
	opts.FS = d.efs
	return Open(memDir, quiet(opts))
}

func (d *memDisk) mustOpen(t *testing.T, opts Options) (*Log, RepairReport) {
	t.Helper()
	l, rep, err := d.open(opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l, rep
}

// crash cuts the power under l (nil: no log open) and returns the crashed
// file system, whose Recover gives what a restart finds. The disk is left
// on Recover(tear).
func (d *memDisk) crash(l *Log, tear memfs.Tear) *memfs.FS {
	crashed := d.fs
	crashed.Crash()
	if l != nil {
		l.Close()
	}
	d.fs = crashed.Recover(tear)
	return crashed
}

func (d *memDisk) path(name string) string { return filepath.Join(memDir, name) }

func (d *memDisk) read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := vfs.ReadFile(d.fs, d.path(name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// write replaces a file's content, durably (damage done to a stopped log).
func (d *memDisk) write(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := vfs.WriteFileSynced(d.fs, d.path(name), b, 0o640); err != nil {
		t.Fatal(err)
	}
}

func (d *memDisk) names(t *testing.T) []string {
	t.Helper()
	ents, err := d.fs.ReadDir(memDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func (d *memDisk) segments(t *testing.T) []segmentFile {
	t.Helper()
	segs, _, err := listSegments(d.fs, memDir)
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

// replay opens the disk and returns every body in order.
func (d *memDisk) replay(opts Options) ([]string, RepairReport, error) {
	l, rep, err := d.open(opts)
	if err != nil {
		return nil, rep, err
	}
	defer l.Close()
	var out []string
	err = l.Replay(1, func(index uint64, _ Kind, b []byte) error {
		if want := uint64(len(out) + 1); index != want {
			return fmt.Errorf("replayed index %d, want %d", index, want)
		}
		out = append(out, string(b))
		return nil
	})
	return out, rep, err
}

// appendGroup appends bodies as one group (EnqueueAll) and waits.
func appendGroup(l *Log, bodies ...[]byte) error {
	ctx := context.Background()
	if err := l.ReserveN(ctx, len(bodies)); err != nil {
		return err
	}
	entries := make([]Entry, len(bodies))
	for i, b := range bodies {
		entries[i] = Entry{Kind: KindBatch, Body: b}
	}
	_, c, err := l.EnqueueAll(entries)
	if err != nil {
		return err
	}
	return c.Wait(ctx)
}
