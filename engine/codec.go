package engine

import (
	"encoding/binary"

	"github.com/idemdb/idem/store"
)

// A batch's log body holds only its writes; conditions were decided before
// the batch was sequenced and are not replayed:
//
//	uvarint(n) then n × ( op(1) | uvarint(len key) | key | [uvarint(len value) | value] )
//
// with op 1 = put (value follows) and 2 = delete.
const (
	opPut    = 1
	opDelete = 2
)

func encodedBodySize(ops []store.Op) int {
	n := binary.MaxVarintLen64
	for _, op := range ops {
		n += 1 + binary.MaxVarintLen64 + len(op.Key)
		if !op.Delete {
			n += binary.MaxVarintLen64 + len(op.Value)
		}
	}
	return n
}

func encodeBody(dst []byte, ops []store.Op) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ops)))
	for _, op := range ops {
		if op.Delete {
			dst = append(dst, opDelete)
			dst = binary.AppendUvarint(dst, uint64(len(op.Key)))
			dst = append(dst, op.Key...)
			continue
		}
		dst = append(dst, opPut)
		dst = binary.AppendUvarint(dst, uint64(len(op.Key)))
		dst = append(dst, op.Key...)
		dst = binary.AppendUvarint(dst, uint64(len(op.Value)))
		dst = append(dst, op.Value...)
	}
	return dst
}

// decodeBody calls fn for each op of a body; keys and values alias body.
func decodeBody(body []byte, fn func(op store.Op)) error {
	n, k := binary.Uvarint(body)
	if k <= 0 || n > uint64(len(body)) {
		return errBadBody
	}
	body = body[k:]
	for i := uint64(0); i < n; i++ {
		if len(body) < 1 {
			return errBadBody
		}
		kind := body[0]
		body = body[1:]
		key, rest, ok := cutBytes(body)
		if !ok || len(key) == 0 {
			return errBadBody
		}
		body = rest
		switch kind {
		case opDelete:
			fn(store.Op{Key: key, Delete: true})
		case opPut:
			val, rest, ok := cutBytes(body)
			if !ok {
				return errBadBody
			}
			body = rest
			fn(store.Op{Key: key, Value: val})
		default:
			return errBadBody
		}
	}
	if len(body) != 0 {
		return errBadBody
	}
	return nil
}

// cutBytes splits a uvarint-length-prefixed byte string off b.
func cutBytes(b []byte) (s, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}
