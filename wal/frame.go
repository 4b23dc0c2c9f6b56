package wal

import (
	"encoding/binary"
	"hash/crc32"
)

// A frame is what we store in each tidwall/wal entry:
//
//	magic(2) | version(1) | kind(1) | flags(1) | crc32c(4, little endian) | [part(4)] | body
//
// The CRC covers index‖kind‖body, where index is the entry's 8-byte little
// endian log position — and, when flags is not zero, index‖kind‖flags‖part‖body.
// tidwall/wal keeps no checksum of its own, and a zero-filled tail decodes
// there as a run of empty entries; the magic, the version and the CRC
// (which binds a frame to its position) let us tell a real entry from such
// debris.
//
// The first frame a group write puts into a segment is its head (flag
// flagHead) and carries part: how many bytes — tidwall's length prefixes
// included — that group wrote into this segment, starting with the head's
// own prefix. Repair on open uses it to tell the final group write, the
// only one a crash can tear, from the groups before it, and a torn write
// (which ends early) from damage to bytes that were all written.
const (
	frameMagic0   = 0xD1
	frameMagic1   = 0xE3
	frameVersion  = 1
	frameHeader   = 9
	frameCRCStart = 5
	framePartLen  = 4

	flagHead   = 0x01
	flagsKnown = flagHead
)

// FrameVersion is the frame format this build writes and the only one it
// reads (docs/upgrading.md): a new one needs a new value and a reader of
// both.
const FrameVersion = frameVersion

// Kind says what a frame's body holds. The log does not interpret bodies.
type Kind uint8

const (
	// KindInvalid is never written; a zero byte where a kind should be is debris.
	KindInvalid Kind = 0
	// KindBatch is an engine batch.
	KindBatch Kind = 1
	// KindNoop carries no data (used by tests and to force a sync point).
	KindNoop Kind = 2
	// KindCheckpoint records that a checkpoint was written (the engine's).
	KindCheckpoint Kind = 3
	kindMax             = KindCheckpoint
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// frameCRC computes the checksum of one frame's content at index.
func frameCRC(index uint64, kind Kind, flags byte, part uint32, body []byte) uint32 {
	var pre [14]byte
	binary.LittleEndian.PutUint64(pre[:8], index)
	pre[8] = byte(kind)
	n := 9
	if flags != 0 {
		pre[9] = flags
		binary.LittleEndian.PutUint32(pre[10:], part)
		n = 14
	}
	c := crc32.Update(0, crcTable, pre[:n])
	return crc32.Update(c, crcTable, body)
}

// appendFrame appends the frame for (index, kind, body) to dst; a head
// (part > 0) carries the byte length of its group's part in this segment.
func appendFrame(dst []byte, index uint64, kind Kind, body []byte, part uint32) []byte {
	var h [frameHeader + framePartLen]byte
	flags := byte(0)
	n := frameHeader
	if part > 0 {
		flags = flagHead
		binary.LittleEndian.PutUint32(h[frameHeader:], part)
		n += framePartLen
	}
	h[0], h[1], h[2], h[3], h[4] = frameMagic0, frameMagic1, frameVersion, byte(kind), flags
	binary.LittleEndian.PutUint32(h[frameCRCStart:], frameCRC(index, kind, flags, part, body))
	dst = append(dst, h[:n]...)
	return append(dst, body...)
}

// frameSize is the encoded size of a frame with a body of n bytes.
func frameSize(n int, head bool) int {
	if head {
		return frameHeader + framePartLen + n
	}
	return frameHeader + n
}

// onDiskSize is what tidwall writes for a frame of frameLen bytes: its
// uvarint length prefix and the frame.
func onDiskSize(frameLen int) int { return uvarintLen(uint64(frameLen)) + frameLen }

// frame is a decoded frame; body aliases the data it was decoded from.
type frame struct {
	kind Kind
	body []byte
	part uint32 // > 0 for a group head
}

// decodeFrame checks that data is a valid frame for position index. The
// error, if any, is a *FrameError saying what was wrong.
func decodeFrame(index uint64, data []byte) (frame, error) {
	kind, flags, ok := frameShape(data)
	if !ok {
		return frame{}, &FrameError{Index: index, Reason: shapeReason(data)}
	}
	body, part := data[frameHeader:], uint32(0)
	if flags&flagHead != 0 {
		if len(body) < framePartLen {
			return frame{}, &FrameError{Index: index, Reason: "short frame"}
		}
		part, body = binary.LittleEndian.Uint32(body), body[framePartLen:]
		if part == 0 {
			return frame{}, &FrameError{Index: index, Reason: "head without a length"}
		}
	}
	if binary.LittleEndian.Uint32(data[frameCRCStart:]) != frameCRC(index, kind, flags, part, body) {
		return frame{}, &FrameError{Index: index, Reason: "checksum mismatch"}
	}
	return frame{kind: kind, body: body, part: part}, nil
}

// frameShape checks everything of a frame but its checksum: what can be
// told without knowing its index.
func frameShape(data []byte) (Kind, byte, bool) {
	if len(data) < frameHeader || data[0] != frameMagic0 || data[1] != frameMagic1 || data[2] != frameVersion {
		return 0, 0, false
	}
	kind, flags := Kind(data[3]), data[4]
	if kind == KindInvalid || kind > kindMax || flags&^flagsKnown != 0 {
		return 0, 0, false
	}
	return kind, flags, true
}

func shapeReason(data []byte) string {
	switch {
	case len(data) < frameHeader:
		return "short frame"
	case data[0] != frameMagic0 || data[1] != frameMagic1:
		return "bad magic"
	case data[2] != frameVersion:
		return "unknown frame version"
	case Kind(data[3]) == KindInvalid || Kind(data[3]) > kindMax:
		return "unknown kind"
	}
	return "unknown flags"
}

func uvarintLen(x uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], x)
}
