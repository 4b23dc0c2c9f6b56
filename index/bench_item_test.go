package index

import "encoding/binary"

// imageItem is key's item as a checkpoint's image holds it: packed if it
// can be.
func imageItem(key, value []byte, version uint64) KV {
	buf, packed := AppendStoredKey(nil, key)
	klen := len(buf)
	kv := PackedKV(binary.AppendUvarint(append(buf, value...), version), klen, len(value))
	if packed {
		kv = kv.WithPackedKey()
	}
	return kv
}
