package table

import "encoding/binary"

// appendIntent appends in's CBOR encoding — byte for byte what cbor.Marshal
// writes for the struct (a map, keys in field order, empty fields left
// out) — to dst. A batch stages one intent per document: encoding them all
// into one buffer is one allocation where cbor.Marshal makes one each (the
// store copies what it keeps).
func appendIntent(dst []byte, in intent) []byte {
	n := byte(1)
	if in.Deleted {
		n++
	}
	if len(in.Doc) > 0 {
		n++
	}
	if in.Read {
		n++
	}
	dst = append(dst, 0xa0|n, 0x01)
	dst = appendCBORHead(dst, 0x60, uint64(len(in.Txn)))
	dst = append(dst, in.Txn...)
	if in.Deleted {
		dst = append(dst, 0x02, 0xf5)
	}
	if len(in.Doc) > 0 {
		dst = append(dst, 0x03)
		dst = appendCBORHead(dst, 0x40, uint64(len(in.Doc)))
		dst = append(dst, in.Doc...)
	}
	if in.Read {
		dst = append(dst, 0x04, 0xf5)
	}
	return dst
}

// intentBytesMax bounds appendIntent's output for a txn ID and a document
// of the given lengths.
func intentBytesMax(txn, doc int) int { return 1 + 1 + 9 + txn + 2 + 1 + 9 + doc + 2 }

// appendCBORHead appends a CBOR head of major type major (its high three
// bits) and argument v, in the shortest form, as RFC 8949 §4.2.1 asks.
func appendCBORHead(dst []byte, major byte, v uint64) []byte {
	switch {
	case v < 24:
		return append(dst, major|byte(v))
	case v <= 0xff:
		return append(dst, major|24, byte(v))
	case v <= 0xffff:
		return binary.BigEndian.AppendUint16(append(dst, major|25), uint16(v))
	case v <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(dst, major|26), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, major|27), v)
}
