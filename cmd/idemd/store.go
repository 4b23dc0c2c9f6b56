package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/engine/enginemetrics"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	etcdstore "github.com/idemdb/idem/store/etcd"
	"github.com/idemdb/idem/wal"
)

// etcdHealthTimeout bounds the read /healthz makes to learn whether etcd
// answers: a node that cannot reach its cluster says so within it.
const etcdHealthTimeout = time.Second

// etcdHealthKey is read by the health probe: any key works (absent is
// healthy), one under the prefix keeps it within the deployment's rights.
var etcdHealthKey = []byte("meta/v1/health")

// servedStore is the store idemd serves on, and what the API shows of it.
// The store is a named field, not embedded: servedStore is no store.Store
// itself, so it cannot be handed to the receipt layer by mistake and hide
// what the store offers beyond the contract (store.Chainer, Health).
type servedStore struct {
	store store.Store
	name  string     // the shard's name in the -etcd-shards map; "" without one
	db    *engine.DB // the local engine; nil on etcd
	// restore is the store's restore epoch (nil: never restored), and
	// restoreLog what the start-up log says of it beyond the fence.
	restore    *receipt.RestoreFence
	restoreLog []any
	health     func() error
	collectors []prometheus.Collector
	close      func() error
}

// openStores opens -store: the local engine in -data, or etcd, one store
// per shard of the map (one without -etcd-shards), each shard's record of
// the map checked (shardrecord.go). On failure what was opened is closed.
func openStores(ctx context.Context, c config, log *slog.Logger) (_ []*servedStore, err error) {
	if c.store != storeEtcd {
		s, err := openStore(ctx, c, log)
		if err != nil {
			return nil, err
		}
		return []*servedStore{s}, nil
	}
	var stores []*servedStore
	defer func() {
		if err != nil {
			for _, s := range stores {
				s.close()
			}
		}
	}()
	for _, t := range c.targets {
		s, err := openEtcd(ctx, c, t, log)
		if err != nil {
			return nil, err
		}
		stores = append(stores, s)
	}
	if err := checkShardRecords(ctx, c, stores, log); err != nil {
		return nil, err
	}
	return stores, nil
}

// openStore opens the local engine in -data.
func openStore(ctx context.Context, c config, log *slog.Logger) (*servedStore, error) {
	opts := engine.Options{CheckpointLogBytes: c.checkpointBytes, Logger: log, CollectorOffAtOpen: true, MapCheckpoints: c.mapCheckpoints, WAL: wal.Options{SegmentBytes: c.segmentBytes, NoPreallocation: c.walPlain, GroupLinger: walLinger(c.walLinger)}}
	if c.valueLog {
		opts.ColdValue = receipt.ColdValue
	}
	db, err := engine.Open(c.data, opts)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", c.data, err)
	}
	s := &servedStore{store: db, db: db, health: db.Health,
		collectors: []prometheus.Collector{enginemetrics.New(db.Stats)},
		close: func() error {
			if err := db.Close(); !errors.Is(err, store.ErrClosed) {
				return err
			}
			return nil
		}}
	localRestore(s)
	return s, nil
}

// backupFunc takes backups of db under -backup-dir (nil: no -backup-dir,
// or no local engine to back up). The api checks the name is plain.
func backupFunc(c config, db *engine.DB) api.BackupFunc {
	if c.backupDir == "" || db == nil {
		return nil
	}
	return func(name string) (engine.BackupManifest, error) {
		if err := os.MkdirAll(c.backupDir, 0o750); err != nil {
			return engine.BackupManifest{}, err
		}
		return db.Backup(filepath.Join(c.backupDir, name))
	}
}

// restoreFence is the receipt layer's fence of a store restored from a
// backup (nil: never restored), logged at every start while it lasts, and
// once after.
func restoreFence(s *servedStore, retention time.Duration, log *slog.Logger) *receipt.RestoreFence {
	f := s.restore
	if f == nil {
		return nil
	}
	until := f.RestoredAt.Add(retention)
	log.Warn("idemd: the store was restored from a backup: keys it does not know, first sent before the restore, are refused 409 key_may_have_executed until the fence ends",
		append([]any{"restored_at", f.RestoredAt, "backup_time", f.BackupTime}, append(s.restoreLog,
			"fence_until", until, "fence_over", time.Now().After(until))...)...)
	return f
}

// localRestore is the local engine's restore epoch (engine/restore.go).
func localRestore(s *servedStore) {
	e, ok := s.db.Restored()
	if !ok {
		return
	}
	s.restore = &receipt.RestoreFence{BackupTime: e.BackupTime, RestoredAt: e.RestoredAt}
	s.restoreLog = []any{"backup_version", uint64(e.BackupVersion)}
}

// etcdRestore reads the deployment's restore epoch, recorded by `idemctl
// etcd-restored` (store/etcd/restore.go). Read once, at start: a
// node running when it is recorded does not see it (docs/operations.md:
// nodes are stopped for a restore and started after the record).
func etcdRestore(ctx context.Context, s *servedStore, d time.Duration, prefix string) error {
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	e, ok, err := etcdstore.ReadRestore(rctx, s.store)
	if err != nil {
		return fmt.Errorf("read the restore epoch under %s: %w", prefix, err)
	}
	if ok {
		s.restore = &receipt.RestoreFence{BackupTime: e.BackupTime, RestoredAt: e.RestoredAt}
		s.restoreLog = []any{"record", prefix + string(etcdstore.RestoreKey)}
	}
	return nil
}

// openEtcd connects to the cluster t and refuses to start unless it
// answers a linearizable read within -etcd-dial-timeout: a node that
// cannot reach etcd has nothing to serve.
func openEtcd(ctx context.Context, c config, t etcdTarget, log *slog.Logger) (*servedStore, error) {
	cfg, err := etcdClientConfig(c, t)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		hint := ""
		if t.CA == "" && strings.Contains(strings.Join(t.Endpoints, ","), "https://") {
			hint = "; https endpoints need -etcd-ca"
		}
		return nil, fmt.Errorf("etcd %v: %w (within -etcd-dial-timeout %v%s)", t.Endpoints, err, c.etcdDialTimeout, hint)
	}
	space, err := etcdstore.NewSpace(cli, etcdstore.SpaceOptions{QuotaBytes: c.etcdQuota, HighWater: c.etcdHighWater, Interval: c.etcdSpaceEvery})
	if err != nil {
		cli.Close()
		return nil, err
	}
	st, err := etcdstore.New(cli, etcdstore.Options{Prefix: t.Prefix, Space: space})
	if err != nil {
		cli.Close()
		return nil, err
	}
	probe := func(ctx context.Context, d time.Duration) error {
		pctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		if _, err := st.Get(pctx, etcdHealthKey); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return nil
	}
	if err := probe(ctx, c.etcdDialTimeout); err != nil {
		st.Close()
		cli.Close()
		return nil, fmt.Errorf("etcd %v did not answer within -etcd-dial-timeout %v: %w", t.Endpoints, c.etcdDialTimeout, err)
	}
	s := &servedStore{store: st, name: t.Name}
	if err := etcdRestore(ctx, s, c.etcdDialTimeout, t.Prefix); err != nil {
		st.Close()
		cli.Close()
		return nil, err
	}
	stopSpace := watchSpace(space, c.etcdSpaceEvery, log)
	log.Info("idemd: store etcd", "shard", t.Name, "endpoints", t.Endpoints, "prefix", t.Prefix, "advertise", c.advertise,
		"limits", fmt.Sprintf("%+v", st.Limits()), "space", fmt.Sprintf("%+v", space.Stats()))
	s.collectors = spaceCollectors(space, shardLabels(c, t))
	s.health = probeHealth(probe)
	s.close = func() error {
		stopSpace()
		st.Close()
		return cli.Close()
	}
	return s, nil
}

// probeHealth is /healthz's view of etcd: unhealthy while it does not
// answer within etcdHealthTimeout.
func probeHealth(probe func(context.Context, time.Duration) error) func() error {
	return func() error {
		if err := probe(context.Background(), etcdHealthTimeout); err != nil {
			return fmt.Errorf("etcd does not answer (%w: %v): this node serves nothing until it does", store.ErrUnavailable, err)
		}
		return nil
	}
}

// etcdClientConfig is the etcd client of target t (the -etcd-* flags', or
// a shard's of the map): TLS with a CA (and a client certificate with a
// cert), a user with a user. Files that cannot be read stop the start with
// their name.
func etcdClientConfig(c config, t etcdTarget) (clientv3.Config, error) {
	return etcdstore.ClientOptions{Endpoints: t.Endpoints, DialTimeout: c.etcdDialTimeout,
		CA: t.CA, Cert: t.Cert, Key: t.Key, User: t.User, PasswordFile: t.Password}.Config()
}

// shardLabels label a shard's store metrics with its name on a deployment
// of several shards (nil for one: the series are as they were).
func shardLabels(c config, t etcdTarget) prometheus.Labels {
	if len(c.targets) < 2 {
		return nil
	}
	return prometheus.Labels{"shard": t.Name}
}

// walLinger maps -wal-group-linger onto wal.Options.GroupLinger, where 0
// takes the default and only a negative value never lingers.
func walLinger(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
