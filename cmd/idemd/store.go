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
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/engine/enginemetrics"
	"github.com/idemdb/idem/engine/etcdstore"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/wal"
)

// etcdHealthTimeout bounds the read /healthz makes to learn whether etcd
// answers: a node that cannot reach its cluster says so within it.
const etcdHealthTimeout = time.Second

// etcdHealthKey is read by the health probe: any key works (absent is
// healthy), one under the prefix keeps it within the deployment's rights.
var etcdHealthKey = []byte("meta/v1/health")

// servedStore is the store idemd serves on, and what the API shows of it.
// The store is a named field, not embedded: servedStore is no engine.Store
// itself, so it cannot be handed to the receipt layer by mistake and hide
// what the store offers beyond the contract (engine.Chainer, Health).
type servedStore struct {
	store      engine.Store
	db         *engine.DB // the local engine; nil on etcd
	health     func() error
	collectors []prometheus.Collector
	close      func() error
}

// openStore opens -store: the local engine in -data, or etcd.
func openStore(ctx context.Context, c config, log *slog.Logger) (*servedStore, error) {
	if c.store == storeEtcd {
		return openEtcd(ctx, c, log)
	}
	opts := engine.Options{CheckpointLogBytes: c.checkpointBytes, Logger: log, WAL: wal.Options{SegmentBytes: c.segmentBytes, NoPreallocation: c.walPlain, GroupLinger: walLinger(c.walLinger)}}
	if c.valueLog {
		opts.ColdValue = receipt.ColdValue
	}
	db, err := engine.Open(c.data, opts)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", c.data, err)
	}
	return &servedStore{store: db, db: db, health: db.Health,
		collectors: []prometheus.Collector{enginemetrics.New(db.Stats)},
		close: func() error {
			if err := db.Close(); !errors.Is(err, engine.ErrClosed) {
				return err
			}
			return nil
		}}, nil
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
// backup (nil: never restored, or etcd), logged at every start while it
// lasts, and once after.
func restoreFence(db *engine.DB, retention time.Duration, log *slog.Logger) *receipt.RestoreFence {
	if db == nil {
		return nil
	}
	e, ok := db.Restored()
	if !ok {
		return nil
	}
	until := e.RestoredAt.Add(retention)
	log.Warn("idemd: the store was restored from a backup: keys it does not know, first sent before the restore, are refused 409 key_may_have_executed until the fence ends",
		"restored_at", e.RestoredAt, "backup_time", e.BackupTime, "backup_version", uint64(e.BackupVersion),
		"fence_until", until, "fence_over", time.Now().After(until))
	return &receipt.RestoreFence{BackupTime: e.BackupTime, RestoredAt: e.RestoredAt}
}

// openEtcd connects to the cluster and refuses to start unless it
// answers a linearizable read within -etcd-dial-timeout: a node that
// cannot reach etcd has nothing to serve.
func openEtcd(ctx context.Context, c config, log *slog.Logger) (*servedStore, error) {
	cfg, err := etcdClientConfig(c)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		hint := ""
		if c.etcdCA == "" && strings.Contains(strings.Join(c.etcdEndpoints, ","), "https://") {
			hint = "; https endpoints need -etcd-ca"
		}
		return nil, fmt.Errorf("etcd %v: %w (within -etcd-dial-timeout %v%s)", c.etcdEndpoints, err, c.etcdDialTimeout, hint)
	}
	space, err := etcdstore.NewSpace(cli, etcdstore.SpaceOptions{QuotaBytes: c.etcdQuota, HighWater: c.etcdHighWater, Interval: c.etcdSpaceEvery})
	if err != nil {
		cli.Close()
		return nil, err
	}
	store, err := etcdstore.New(cli, etcdstore.Options{Prefix: c.etcdPrefix, Space: space})
	if err != nil {
		cli.Close()
		return nil, err
	}
	probe := func(ctx context.Context, d time.Duration) error {
		pctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		if _, err := store.Get(pctx, etcdHealthKey); err != nil && !errors.Is(err, engine.ErrNotFound) {
			return err
		}
		return nil
	}
	if err := probe(ctx, c.etcdDialTimeout); err != nil {
		store.Close()
		cli.Close()
		return nil, fmt.Errorf("etcd %v did not answer within -etcd-dial-timeout %v: %w", c.etcdEndpoints, c.etcdDialTimeout, err)
	}
	stopSpace := watchSpace(space, c.etcdSpaceEvery, log)
	log.Info("idemd: store etcd", "endpoints", c.etcdEndpoints, "prefix", c.etcdPrefix, "advertise", c.advertise,
		"limits", fmt.Sprintf("%+v", store.Limits()), "space", fmt.Sprintf("%+v", space.Stats()))
	return &servedStore{store: store, collectors: spaceCollectors(space),
		health: func() error {
			if err := probe(context.Background(), etcdHealthTimeout); err != nil {
				return fmt.Errorf("etcd does not answer (%w: %v): this node serves nothing until it does", engine.ErrUnavailable, err)
			}
			return nil
		},
		close: func() error {
			stopSpace()
			store.Close()
			return cli.Close()
		}}, nil
}

// etcdClientConfig is the etcd client of the -etcd-* flags: TLS with
// -etcd-ca (and a client certificate with -etcd-cert), a user with
// -etcd-user. Files that cannot be read stop the start with their name.
func etcdClientConfig(c config) (clientv3.Config, error) {
	cfg := clientv3.Config{Endpoints: c.etcdEndpoints, DialTimeout: c.etcdDialTimeout, Logger: zap.NewNop()}
	if c.etcdCA != "" {
		tc, err := transport.TLSInfo{TrustedCAFile: c.etcdCA, CertFile: c.etcdCert, KeyFile: c.etcdKey}.ClientConfig()
		if err != nil {
			return cfg, fmt.Errorf("-etcd-ca/-etcd-cert/-etcd-key: %w", err)
		}
		cfg.TLS = tc
	}
	if c.etcdUser != "" {
		pw, err := os.ReadFile(c.etcdPassword)
		if err != nil {
			return cfg, fmt.Errorf("-etcd-password-file: %w", err)
		}
		cfg.Username, cfg.Password = c.etcdUser, strings.TrimRight(string(pw), "\r\n")
		if cfg.Password == "" {
			return cfg, fmt.Errorf("-etcd-password-file %s: empty", c.etcdPassword)
		}
	}
	return cfg, nil
}

// walLinger maps -wal-group-linger onto wal.Options.GroupLinger, where 0
// takes the default and only a negative value never lingers.
func walLinger(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
