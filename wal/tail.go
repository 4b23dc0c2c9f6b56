package wal

import (
	"encoding/binary"
	"fmt"
)

// Torn or corrupt: what repair on open may cut.
//
// Only the final group write can have been in flight when the process
// stopped: the writer starts a group only after the previous group's fsync
// returned. A crash keeps a prefix of what that write put down, possibly
// followed by zero-filled blocks; it never changes bytes that were written,
// never leaves bytes of a later write after a hole it did not leave in the
// earlier one, and leaves nothing in flight when the log was closed
// cleanly. Damage that this cannot explain is corruption — the media or
// someone changed acknowledged bytes — and the open is refused: cutting it
// would silently drop acknowledged writes. judgeTail applies these rules to
// the facts tailFactsOf gathers; it is pure, so the rules are tested as
// data.

const (
	// zeroBlockBytes is the granularity of zero fill: file systems that
	// make a file's new size durable before its data expose whole blocks
	// (page-cache pages) of zeros. A zero run that ends the segment counts
	// as fill only if it starts on such a boundary, so that a frame whose
	// last bytes happen to be zero is not taken for one.
	zeroBlockBytes = 4096
	// resyncTriesMax bounds the indexes whose checksum is tried for one
	// frame-shaped candidate after the damage. Beyond it the shape alone
	// counts as a frame: the open is refused rather than risk a loss.
	resyncTriesMax = 1 << 16
	// minOnDisk is the smallest frame on disk: a one-byte length prefix and
	// a bare header.
	minOnDisk = 1 + frameHeader
)

// closeState is what the close marker says about the last segment.
type closeState int

const (
	notClosed     closeState = iota // no marker: the process stopped without Close
	closedCleanly                   // a valid marker names this segment
	markerDamaged                   // a marker exists but does not decode
)

// tailFacts are what repair knows about the damaged end of the last
// segment. Offsets are within the segment; -1 means unknown or none.
type tailFacts struct {
	size        int64  // bytes in the segment
	damageAt    int64  // end of the valid prefix: the first damaged byte
	damageIndex uint64 // the entry the frame at damageAt would be
	followAt    int64  // a valid frame after the damage
	// The declared part of the group write that holds the last valid frame
	// (scanResult.partStart/partEnd).
	partStart, partEnd int64
	// For damage that begins a part (or lies in no declared part): the
	// nearest end that the damaged frame's own length prefix or head claims.
	claimEnd int64
	// Start of the block-aligned run of zeros that ends the segment
	// (damageAt if every damaged byte is zero, size if there is no run).
	zeroFrom     int64
	closed       closeState
	maxTornBytes int64 // the most a single group write can put down
}

// judgeTail decides whether the damage described by f is a torn final
// group write (cut reports true) and says why.
func judgeTail(f tailFacts) (cut bool, why string) {
	switch f.closed {
	case closedCleanly:
		return false, "the log was closed cleanly, so no write was in flight"
	case markerDamaged:
		return false, "the close marker is damaged, so the log cannot be shown to have stopped mid-write"
	}
	if f.followAt >= 0 {
		return false, fmt.Sprintf("a valid frame follows at offset %d, so the damage is not a torn end", f.followAt)
	}
	if f.partEnd > f.damageAt {
		// The damage lies inside a group write whose head survived.
		if f.size > f.partEnd {
			return false, fmt.Sprintf("bytes follow the damaged group write (offsets %d..%d): a later group was written, so this one had been acknowledged", f.partStart, f.partEnd)
		}
		if f.size == f.partEnd && f.zeroFrom == f.size {
			return false, fmt.Sprintf("the damaged group write (offsets %d..%d) is whole and not zero-filled: bytes changed after they were written", f.partStart, f.partEnd)
		}
		return true, fmt.Sprintf("torn final group write (offsets %d..%d, %d bytes present)", f.partStart, f.partEnd, f.size-f.partStart)
	}
	if f.size-f.damageAt > f.maxTornBytes {
		return false, fmt.Sprintf("%d damaged bytes, more than one group write can hold (%d)", f.size-f.damageAt, f.maxTornBytes)
	}
	if f.claimEnd >= 0 && f.claimEnd <= f.zeroFrom {
		return false, fmt.Sprintf("the damaged frame is whole (ends at offset %d) and not zero-filled: bytes changed after they were written", f.claimEnd)
	}
	return true, fmt.Sprintf("torn final group write (%d bytes from offset %d)", f.size-f.damageAt, f.damageAt)
}

// tailFactsOf gathers the facts about data, a last segment whose scan r
// stopped at damage. The fill of a preallocated segment is left out: it
// is where the final write did not reach, as the end of a growing file is.
func tailFactsOf(data []byte, first uint64, r scanResult, closed closeState, maxTornBytes int64) tailFacts {
	at := r.validEnd
	data = data[:unwrittenFrom(data, at)]
	f := tailFacts{
		size: int64(len(data)), damageAt: int64(at), damageIndex: first + r.entries,
		partStart: int64(r.partStart), partEnd: int64(r.partEnd), claimEnd: -1,
		closed: closed, maxTornBytes: maxTornBytes,
	}
	f.followAt = validFrameAfter(data, at, f.damageIndex)
	f.zeroFrom = zeroRunStart(data, at)
	if f.partEnd <= f.damageAt {
		if size, n := binary.Uvarint(data[at:]); n > 0 && size <= uint64(len(data)) {
			f.claimEnd = int64(at+n) + int64(size)
			fr := data[at+n:]
			if _, flags, ok := frameShape(fr); ok && flags&flagHead != 0 && len(fr) >= frameHeader+framePartLen {
				if part := int64(binary.LittleEndian.Uint32(fr[frameHeader:])); part > 0 {
					f.claimEnd = min(f.claimEnd, int64(at)+part)
				}
			}
		}
	}
	return f
}

// validFrameAfter returns the offset of the first valid frame that starts
// after offset at, or -1. The frame at at would have been entry index, so
// a later one is entry index or more (index itself when only its length
// prefix was damaged); each candidate position bounds how many entries can
// lie before it.
func validFrameAfter(data []byte, at int, index uint64) int64 {
	for p := at + 1; p < len(data); p++ {
		size, n := binary.Uvarint(data[p:])
		if n <= 0 || size < frameHeader || uint64(len(data)-p-n) < size {
			continue
		}
		fr := data[p+n : p+n+int(size)]
		if _, _, ok := frameShape(fr); !ok {
			continue
		}
		skip := (p - at) / minOnDisk
		if skip >= resyncTriesMax {
			return int64(p)
		}
		for i := 0; i <= skip; i++ {
			if _, err := decodeFrame(index+uint64(i), fr); err == nil {
				return int64(p)
			}
		}
	}
	return -1
}

// unwrittenFrom returns where the fill of a preallocated segment begins
// (len(data) if data does not look like one): a preallocated file is a
// whole number of zeroBlockBytes blocks that ends in zeros, and its fill
// runs back from the end to the last non-zero byte, but not before at.
// The final write may end in the last block (the group that fills a
// segment ends in the spare's slack), so that block need not be all
// zeros, and a torn write leaves the spare's zeros after it at any
// offset, not at a block boundary. A final write whose last bytes were
// zeros loses them to the fill, so a whole final write that ends in zeros
// and is damaged elsewhere reads as torn, not as changed: the one
// distinction preallocation gives up (an ordinary segment that happens to
// be a whole number of blocks long and to end in a zero byte gives it up
// too).
func unwrittenFrom(data []byte, at int) int {
	end := len(data)
	if end == 0 || end%zeroBlockBytes != 0 || data[end-1] != 0 {
		return end
	}
	for end-zeroBlockBytes >= at && isZero(data[end-zeroBlockBytes:end]) {
		end -= zeroBlockBytes
	}
	for end > at && data[end-1] == 0 {
		end--
	}
	return end
}

// zeroRunStart returns where the zero fill that ends data begins: at if
// data[at:] is all zeros, else the first block boundary after the last
// non-zero byte if that is before the end, else len(data).
func zeroRunStart(data []byte, at int) int64 {
	last := len(data) - 1
	for last >= at && data[last] == 0 {
		last--
	}
	if last < at {
		return int64(at)
	}
	b := (last/zeroBlockBytes + 1) * zeroBlockBytes
	if b < len(data) {
		return int64(b)
	}
	return int64(len(data))
}
