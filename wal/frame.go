package wal

import (
	"encoding/binary"
	"hash/crc32"
)

// A frame is what we store in each tidwall/wal entry:
//
//	magic(2) | version(1) | kind(1) | flags(1) | crc32c(4, little endian) | body
//
// The CRC covers index‖kind‖body, where index is the entry's 8-byte little
// endian log position. tidwall/wal keeps no checksum of its own, and a
// zero-filled tail decodes there as a run of empty entries; the magic, the
// version and the CRC (which binds a frame to its position) let us tell a real
// entry from such debris.
const (
	frameMagic0   = 0xD1
	frameMagic1   = 0xE3
	frameVersion  = 1
	frameHeader   = 9
	frameCRCStart = 5
)

// Kind says what a frame's body holds. The log does not interpret bodies.
type Kind uint8

const (
	// KindInvalid is never written; a zero byte where a kind should be is debris.
	KindInvalid Kind = 0
	// KindBatch is an engine batch.
	KindBatch Kind = 1
	// KindNoop carries no data (used by tests and to force a sync point).
	KindNoop Kind = 2
	kindMax       = KindNoop
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// frameCRC computes the checksum of one frame's content at index.
func frameCRC(index uint64, kind Kind, body []byte) uint32 {
	var pre [9]byte
	binary.LittleEndian.PutUint64(pre[:8], index)
	pre[8] = byte(kind)
	c := crc32.Update(0, crcTable, pre[:])
	return crc32.Update(c, crcTable, body)
}

// appendFrame appends the frame for (index, kind, body) to dst.
func appendFrame(dst []byte, index uint64, kind Kind, body []byte) []byte {
	var h [frameHeader]byte
	h[0], h[1], h[2], h[3], h[4] = frameMagic0, frameMagic1, frameVersion, byte(kind), 0
	binary.LittleEndian.PutUint32(h[frameCRCStart:], frameCRC(index, kind, body))
	dst = append(dst, h[:]...)
	return append(dst, body...)
}

// frameSize is the encoded size of a frame with a body of n bytes.
func frameSize(n int) int { return frameHeader + n }

// decodeFrame checks that data is a valid frame for position index and
// returns its kind and body (aliasing data). The error, if any, is a
// *FrameError saying what was wrong.
func decodeFrame(index uint64, data []byte) (Kind, []byte, error) {
	if len(data) < frameHeader {
		return 0, nil, &FrameError{Index: index, Reason: "short frame"}
	}
	if data[0] != frameMagic0 || data[1] != frameMagic1 {
		return 0, nil, &FrameError{Index: index, Reason: "bad magic"}
	}
	if data[2] != frameVersion {
		return 0, nil, &FrameError{Index: index, Reason: "unknown frame version"}
	}
	kind := Kind(data[3])
	if kind == KindInvalid || kind > kindMax {
		return 0, nil, &FrameError{Index: index, Reason: "unknown kind"}
	}
	if data[4] != 0 {
		return 0, nil, &FrameError{Index: index, Reason: "unknown flags"}
	}
	body := data[frameHeader:]
	if binary.LittleEndian.Uint32(data[frameCRCStart:]) != frameCRC(index, kind, body) {
		return 0, nil, &FrameError{Index: index, Reason: "checksum mismatch"}
	}
	return kind, body, nil
}
