package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idemdb/idem/store"
)

// Restore epoch on etcd (docs/design.md §15). `etcdutl snapshot restore`
// brings a cluster back to a snapshot: receipts acknowledged after it are
// gone, and a client retrying such a key would see it executed a second
// time. The local engine records its restore epoch itself at the first open
// of a backup (engine/restore.go); etcd cannot tell a restored member from
// any other, so the operator records it (`idemctl etcd-restored`) before
// any node starts, and every node reads it at start and fences the same
// window (receipt.RestoreFence).

// RestoreKey is the record of the deployment's restore epoch, in the meta
// namespace under the deployment's prefix.
var RestoreKey = store.NSMeta.Key("restored")

// restoreFormat is the version of the record's format (docs/upgrading.md).
const restoreFormat = 1

// RestoreEpoch is when a deployment's etcd was restored, and the time of
// the snapshot it was restored from.
type RestoreEpoch struct {
	Format int `json:"format"`
	// RestoredAt is when the restore was recorded: every key first sent
	// before it and unknown to the store may have been lost.
	RestoredAt time.Time `json:"restored_at"`
	// BackupTime is when the snapshot was taken (the operator's word):
	// batches acknowledged after it may be lost.
	BackupTime time.Time `json:"backup_time"`
}

// encodeRestore is the record's value, in restoreFormat.
func encodeRestore(e RestoreEpoch) ([]byte, error) {
	e.Format = restoreFormat
	e.RestoredAt, e.BackupTime = e.RestoredAt.UTC(), e.BackupTime.UTC()
	return json.Marshal(e)
}

// decodeRestore reads a record; a format this build does not know, or a
// time missing, is an error, never a fence of zero times.
func decodeRestore(b []byte) (RestoreEpoch, error) {
	var e RestoreEpoch
	if err := json.Unmarshal(b, &e); err != nil {
		return RestoreEpoch{}, fmt.Errorf("%w: restore epoch %s does not decode: %v", store.ErrCorruption, RestoreKey, err)
	}
	if e.Format != restoreFormat || e.RestoredAt.IsZero() || e.BackupTime.IsZero() {
		return RestoreEpoch{}, fmt.Errorf("%w: restore epoch %s: format %d (this build reads %d), restored_at %v, backup_time %v",
			store.ErrCorruption, RestoreKey, e.Format, restoreFormat, e.RestoredAt, e.BackupTime)
	}
	return e, nil
}

// ReadRestore returns the store's restore epoch; ok=false if none was
// recorded.
func ReadRestore(ctx context.Context, s store.Store) (e RestoreEpoch, ok bool, err error) {
	it, err := s.Get(ctx, RestoreKey)
	if errors.Is(err, store.ErrNotFound) {
		return RestoreEpoch{}, false, nil
	}
	if err != nil {
		return RestoreEpoch{}, false, err
	}
	e, err = decodeRestore(it.Value)
	return e, err == nil, err
}

// RecordRestore writes e if no epoch is recorded (with replace, over the
// one that is) and returns the epoch in force: e if it wrote it, else the
// one found, which it never moves. An ambiguous write is read back.
func RecordRestore(ctx context.Context, s store.Store, e RestoreEpoch, replace bool) (got RestoreEpoch, wrote bool, err error) {
	v, err := encodeRestore(e)
	if err != nil {
		return RestoreEpoch{}, false, err
	}
	if e, err = decodeRestore(v); err != nil { // what a reader will see
		return RestoreEpoch{}, false, err
	}
	b := new(store.Batch)
	if !replace {
		b.Absent(RestoreKey)
	}
	_, err = s.Apply(ctx, b.Put(RestoreKey, v))
	switch {
	case err == nil:
		return e, true, nil
	case errors.Is(err, store.ErrConditionFailed), errors.Is(err, store.ErrAmbiguous):
		found, ok, rerr := ReadRestore(ctx, s)
		if rerr != nil || !ok {
			return RestoreEpoch{}, false, errors.Join(err, rerr)
		}
		return found, found.same(e), nil
	}
	return RestoreEpoch{}, false, err
}

// same reports whether two epochs are one restore.
func (e RestoreEpoch) same(o RestoreEpoch) bool {
	return e.Format == o.Format && e.RestoredAt.Equal(o.RestoredAt) && e.BackupTime.Equal(o.BackupTime)
}
