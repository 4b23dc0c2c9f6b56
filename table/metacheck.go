package table

import (
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/store"
)

// A table's metadata is checked against the same invariants before it is
// encoded (a failure is the writer's bug: store.InvalidRecord, nothing is
// written) and after it is decoded (damage: store.RecordError, naming the
// key) — the paired assertions. A reader relies on them: the shard count
// sizes the planner's counts (plan.go) and divides document hashes.

// check returns the first invariant m breaks, nil if it is well formed.
// The name is not held to today's rule (ValidTableName): only looked-up
// names are, and a table is listed whatever its name.
func (m *Meta) check() error {
	switch {
	case m.Name == "":
		return errors.New("no table name")
	case m.ID == "":
		return errors.New("no table ID")
	case m.Shards < 1 || m.Shards > ShardsMax:
		return fmt.Errorf("%d shards (1..%d)", m.Shards, ShardsMax)
	}
	return nil
}

// encodeMeta encodes m, refusing metadata that breaks its invariants.
func encodeMeta(m Meta) ([]byte, error) {
	if err := m.check(); err != nil {
		return nil, store.InvalidRecord("table: metadata", err)
	}
	return cbor.Marshal(m)
}

// decodeMeta decodes the metadata stored at key: bytes that do not decode,
// or break its invariants, are that key's damage.
func decodeMeta(key, b []byte) (Meta, error) {
	var m Meta
	err := cbor.Unmarshal(b, &m)
	if err == nil {
		err = m.check()
	}
	if err != nil {
		return Meta{}, store.RecordError(key, "table: metadata", err)
	}
	return m, nil
}
