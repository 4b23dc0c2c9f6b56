package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/idemdb/idem/store"
)

// Each shard records the map it belongs to under shardRecordKey (within
// the deployment's prefix), written at the first start of a node with the
// map and compared at every start after: a node whose map differs — its
// version, K, the shards' names or prefixes, or this shard's place in it —
// is refused before it serves anything, since it would send tables to
// shards that do not hold them. Only a deployment holding no data may take
// a new map, and only one of a higher version (docs/cluster.md "Shards").

// shardRecordKey is the shard map's record in every shard.
var shardRecordKey = store.NSMeta.Key("shards")

// shardRecordFormat is the record's format: a record of another format
// (a later build's) stops a start rather than being read as this one.
const shardRecordFormat = 1

// shardRecordFormats is the record's line in idemd -version.
func shardRecordFormats() []store.Format {
	f := fmt.Sprint(shardRecordFormat)
	return []store.Format{{Name: "etcd shard map record", Writes: f, Reads: []string{f}}}
}

// shardRecord is what a shard records of the map: the map's version, K
// and digest, and the shard's own index and name in it.
type shardRecord struct {
	Format  int    `json:"format"`
	Version uint64 `json:"version"`
	Shards  int    `json:"shards"`
	Digest  string `json:"digest"`
	Index   int    `json:"index"`
	Name    string `json:"name"`
}

// foundRecord is a shard's record as read, with the version it was read
// at (a new map replaces it only at that version).
type foundRecord struct {
	shardRecord
	version store.Version
}

func (r shardRecord) String() string {
	return fmt.Sprintf("shard %d (%q) of map version %d, %d shards, digest %s", r.Index, r.Name, r.Version, r.Shards, r.Digest)
}

// dataNamespaces are where a deployment's data lives: receipts, documents,
// sessions, tombstones and table metadata. Node records and leases are not
// data: a deployment that has only ever been started holds none.
var dataNamespaces = [][]byte{store.NSReceipt.Prefix(), store.NSTable.Prefix(), store.NSSession.Prefix(),
	store.NSTomb.Prefix(), store.NSMeta.Prefix("tenant")}

// checkShardRecords checks, and where absent writes, each shard's record
// of the map, within -etcd-dial-timeout. Without -etcd-shards it only
// refuses a store that records a map of several shards.
func checkShardRecords(ctx context.Context, c config, stores []*servedStore, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, c.etcdDialTimeout)
	defer cancel()
	found := make([]*foundRecord, len(stores))
	for i, s := range stores {
		rec, err := readShardRecord(ctx, s.store)
		if err != nil {
			return fmt.Errorf("read the shard map's record %s: %w", shardRecordKey, err)
		}
		found[i] = rec
	}
	if c.shardMap == nil {
		if rec := found[0]; rec != nil && rec.Shards > 1 {
			return fmt.Errorf("the etcd cluster is %s: start every node with that map's -etcd-shards, not -etcd-endpoints alone", rec)
		}
		return nil
	}
	want := make([]shardRecord, len(stores))
	digest := c.shardMap.digest()
	for i := range want {
		want[i] = shardRecord{Format: shardRecordFormat, Version: c.shardMap.Version, Shards: len(stores), Digest: digest, Index: i, Name: c.targets[i].Name}
	}
	if err := refuseChangedMap(ctx, stores, found, want, log); err != nil {
		return err
	}
	for i, s := range stores {
		if found[i] != nil && found[i].shardRecord == want[i] {
			continue
		}
		if err := writeShardRecord(ctx, s.store, found[i], want[i]); err != nil {
			return err
		}
	}
	log.Info("idemd: shard map", "version", c.shardMap.Version, "shards", len(stores), "digest", digest)
	return nil
}

// refuseChangedMap refuses a map that differs from what a shard records
// (or, for several shards, a shard holding data that records none), unless
// the deployment holds no data anywhere and the map's version is higher.
func refuseChangedMap(ctx context.Context, stores []*servedStore, found []*foundRecord, want []shardRecord, log *slog.Logger) error {
	var changed *shardRecord
	for i, rec := range found {
		switch {
		case rec != nil && rec.shardRecord != want[i]:
			changed = &rec.shardRecord
		case rec == nil && len(stores) > 1:
			full, err := holdsData(ctx, stores[i].store)
			if err != nil {
				return fmt.Errorf("shard %q: look for data: %w", want[i].Name, err)
			}
			if full {
				return fmt.Errorf("shard %d (%q) holds data but records no shard map: it was served unsharded, and moving its tables to other shards is not supported; "+
					"start with the map it was served with", i, want[i].Name)
			}
		}
		if changed != nil {
			break
		}
	}
	if changed == nil {
		return nil
	}
	if changed.Version >= want[0].Version {
		return fmt.Errorf("this node's -etcd-shards (map version %d, %d shards, digest %s) is not the deployment's: the cluster is %s; "+
			"every node must use the same map (a changed map needs a higher version, and an empty deployment)", want[0].Version, want[0].Shards, want[0].Digest, changed)
	}
	for i, s := range stores {
		full, err := holdsData(ctx, s.store)
		if err != nil {
			return fmt.Errorf("shard %q: look for data: %w", want[i].Name, err)
		}
		if full {
			return fmt.Errorf("this node's -etcd-shards (map version %d) differs from the deployment's (%s), and shard %d (%q) holds data: "+
				"moving tables between shards is not supported; start with the deployment's map", want[0].Version, changed, i, want[i].Name)
		}
	}
	log.Warn("idemd: the shard map changed on a deployment holding no data: recording the new one", "was", changed.String(), "version", want[0].Version)
	return nil
}

func readShardRecord(ctx context.Context, s store.Store) (*foundRecord, error) {
	it, err := s.Get(ctx, shardRecordKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rec := foundRecord{version: it.Version}
	if err := json.Unmarshal(it.Value, &rec.shardRecord); err != nil {
		return nil, store.RecordError(it.Key, "idemd: shard map record", err)
	}
	if rec.Format != shardRecordFormat {
		return nil, fmt.Errorf("the shard map's record is of format %d; this build reads %d: start a build that reads it", rec.Format, shardRecordFormat)
	}
	return &rec, nil
}

// writeShardRecord writes want over was, at the version it was read (nil:
// create if absent). A concurrent start with another map loses the race
// or wins it; either way the record read back decides, so two maps are
// never both accepted.
func writeShardRecord(ctx context.Context, s store.Store, was *foundRecord, want shardRecord) error {
	v, err := json.Marshal(want)
	if err != nil {
		return err
	}
	b := new(store.Batch)
	if was == nil {
		b.Absent(shardRecordKey)
	} else {
		b.AtVersion(shardRecordKey, was.version)
	}
	_, err = s.Apply(ctx, b.Put(shardRecordKey, v))
	if err != nil && !errors.Is(err, store.ErrConditionFailed) && !errors.Is(err, store.ErrAmbiguous) {
		return fmt.Errorf("record the shard map in shard %q: %w", want.Name, err)
	}
	got, rerr := readShardRecord(ctx, s)
	switch {
	case rerr != nil:
		return fmt.Errorf("read back the shard map's record in shard %q: %w", want.Name, rerr)
	case got == nil:
		return fmt.Errorf("the shard map's record in shard %q is gone as this node started: start again", want.Name)
	case got.shardRecord != want:
		return fmt.Errorf("another node recorded another shard map in shard %q while this one started: %s; every node must use the same map", want.Name, got.shardRecord)
	}
	return nil
}

// holdsData reports whether s holds any receipt, document, session,
// tombstone or table.
func holdsData(ctx context.Context, s store.Store) (bool, error) {
	for _, p := range dataNamespaces {
		items, err := s.Scan(ctx, p, store.PrefixEnd(p), 1)
		if err != nil {
			return false, err
		}
		if len(items) > 0 {
			return true, nil
		}
	}
	return false, nil
}
