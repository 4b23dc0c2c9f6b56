package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"

	"github.com/idemdb/idem/vfs"
)

// The close marker. Close writes it, durably, once every group is written
// and the tail segment fsynced; Open reads it and removes it, durably,
// before the first new write. Its presence therefore proves that no write
// was in flight when the log stopped, and it records how the tail looked:
// any damage to a cleanly closed log — a flipped byte, a segment cut short
// or grown — is corruption, never a torn tail to cut.
//
//	"IDEMWCL1" | tail segment's first index u64 | tail size u64 | last index u64 | crc32c u32
//
// MarkerFormat is the clean-close marker's magic, the name of its format
// (docs/upgrading.md).
const MarkerFormat = "IDEMWCL1"

const (
	markerName  = "CLOSED"
	markerMagic = MarkerFormat
	markerLen   = 8 + 8 + 8 + 8 + 4
)

type closeMarker struct {
	tailFirst uint64
	tailSize  int64
	lastIndex uint64
}

func (m closeMarker) encode() []byte {
	b := make([]byte, markerLen)
	copy(b, markerMagic)
	binary.LittleEndian.PutUint64(b[8:], m.tailFirst)
	binary.LittleEndian.PutUint64(b[16:], uint64(m.tailSize))
	binary.LittleEndian.PutUint64(b[24:], m.lastIndex)
	binary.LittleEndian.PutUint32(b[32:], crc32.Checksum(b[:32], crcTable))
	return b
}

func decodeMarker(b []byte) (closeMarker, error) {
	if len(b) != markerLen || string(b[:8]) != markerMagic ||
		binary.LittleEndian.Uint32(b[32:]) != crc32.Checksum(b[:32], crcTable) {
		return closeMarker{}, errors.New("wal: close marker does not decode")
	}
	return closeMarker{
		tailFirst: binary.LittleEndian.Uint64(b[8:]),
		tailSize:  int64(binary.LittleEndian.Uint64(b[16:])),
		lastIndex: binary.LittleEndian.Uint64(b[24:]),
	}, nil
}

// readMarker returns the marker in dir, whether one exists, and whether it
// decodes (a damaged marker is reported, not fatal: see judgeTail).
func readMarker(fsys vfs.FS, dir string) (m closeMarker, state closeState, err error) {
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, markerName))
	if errors.Is(err, fs.ErrNotExist) {
		return closeMarker{}, notClosed, nil
	}
	if err != nil {
		return closeMarker{}, notClosed, err
	}
	if m, err = decodeMarker(b); err != nil {
		return closeMarker{}, markerDamaged, nil
	}
	return m, closedCleanly, nil
}

// checkMarker verifies that a cleanly closed tail is what the marker
// recorded: a cleanly closed log must open exactly as it was closed.
func checkMarker(m closeMarker, seg segmentFile, size int64, lastIndex uint64, path string) error {
	switch {
	case m.tailFirst != seg.first:
		return &CorruptionError{Segment: seg.name, Path: path, Index: lastIndex + 1,
			Reason: fmt.Sprintf("the log was closed cleanly with segment %s last, but segment %s is last now", segmentName(m.tailFirst), seg.name)}
	case m.tailSize != size || m.lastIndex != lastIndex:
		return &CorruptionError{Segment: seg.name, Path: path, Index: min(m.lastIndex, lastIndex) + 1, Offset: min(size, m.tailSize),
			Reason: fmt.Sprintf("the log was closed cleanly with %d bytes and entries up to %d in its last segment; it now has %d bytes and entries up to %d", m.tailSize, m.lastIndex, size, lastIndex)}
	}
	return nil
}

// writeMarker makes the close marker durable.
func writeMarker(fsys vfs.FS, dir string, m closeMarker) error {
	return vfs.WriteFileSynced(fsys, filepath.Join(dir, markerName), m.encode(), 0o640)
}

// removeMarker deletes the marker durably: after it, a crash is a crash.
func removeMarker(fsys vfs.FS, dir string) error {
	if err := fsys.Remove(filepath.Join(dir, markerName)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return vfs.SyncDir(fsys, dir)
}
