package engine

import (
	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// StoredKey is one key of an open store as it holds it, with the value
// read back if the value log holds it.
type StoredKey struct {
	Key     []byte
	Version store.Version
	// Bytes are the key's and the value's as the tree holds them: for a
	// value in the value log, its pointer's.
	Bytes      int64
	InValueLog bool
	// ValueErr says why a value in the value log does not read back whole
	// (checksum, framing, the record being the key's); ValueFile and
	// ValueOffset (-1: not known) say where it should be, relative to the
	// data dir.
	ValueErr    error
	ValueFile   string
	ValueOffset int64
}

// VerifyKeys calls fn with every key of the store in key order, until fn
// returns false, reading back each value the value log holds: the
// offline checker's (engine/check) count of what an open built. It walks
// a copy-on-write clone of the tree, so writers are not held up, and
// reads every value in the value log once.
func (db *DB) VerifyKeys(fn func(StoredKey) bool) {
	db.treeMu.Lock()
	tree := db.tree.Clone()
	db.treeMu.Unlock()
	tree.AscendAll(func(it index.KV) bool {
		key := it.Key()
		k := StoredKey{Key: key, Version: store.Version(it.Version()), Bytes: int64(len(key) + len(it.Value())),
			InValueLog: it.Indirect(), ValueOffset: -1}
		if k.InValueLog {
			ptr, err := decodeVlogPtr(it.Value())
			if err == nil {
				_, err = db.vlog.read(key, ptr)
			}
			if k.ValueErr = err; err != nil {
				k.ValueFile = vlogDirName
				if ptr.seg != 0 {
					k.ValueFile, k.ValueOffset = vlogDirName+"/"+vlogSegName(ptr.seg), int64(ptr.off)
				}
			}
		}
		return fn(k)
	})
}
