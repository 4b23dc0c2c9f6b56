package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	etcdstore "github.com/idemdb/idem/store/etcd"
)

// etcdRecordTimeout bounds the connection, the write and its read-back:
// the cluster answers a single Txn in milliseconds when it answers at all.
const etcdRecordTimeout = 30 * time.Second

// The etcd flags' defaults are idemd's, so one command line reaches the
// same cluster and prefix.
const (
	etcdPrefixDefault      = "/idem/"
	etcdDialTimeoutDefault = 5 * time.Second
)

var etcdRestoredCommand = command{
	name:     "etcd-restored",
	synopsis: "-etcd-endpoints HOST:PORT,… [-etcd-prefix P] -backup-time RFC3339 [-force]",
	summary:  "record that a deployment's etcd was restored from a snapshot (the restore fence)",
	doc: "After `etcdutl snapshot restore`, and before any idemd starts on the restored cluster,\n" +
		"record the restore epoch under the prefix: restored_at (now) and -backup-time (when\n" +
		"`etcdctl snapshot save` ran). Every idemd reads it at start and, for -retention after\n" +
		"restored_at, refuses 409 key_may_have_executed keys it does not know first sent before it.\n\n" +
		"The record is written once: a second run for the same -backup-time changes nothing\n" +
		"(restored_at never moves); a different -backup-time is refused unless -force, which records\n" +
		"a later restore (restored_at now: its fence covers the earlier one's window too).\n" +
		"Running nodes read the record only at start: restart them after it.\n" +
		"Exit 0 recorded (or already), 1 another restore is recorded, 2 could not run.",
	run: runEtcdRestored,
}

// etcdRestoredFlags are the verb's flags; the -etcd-* ones are idemd's.
type etcdRestoredFlags struct {
	endpoints, prefix, backupTime string
	client                        etcdstore.ClientOptions
	force                         bool
}

func (f *etcdRestoredFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.endpoints, "etcd-endpoints", "", "the cluster's client endpoints, host:port,host:port,… (as idemd's)")
	fs.StringVar(&f.prefix, "etcd-prefix", etcdPrefixDefault, "the deployment's key prefix (as idemd's; default idemd's)")
	fs.DurationVar(&f.client.DialTimeout, "etcd-dial-timeout", etcdDialTimeoutDefault, "how long to wait to reach the cluster (default idemd's)")
	fs.StringVar(&f.client.CA, "etcd-ca", "", "`FILE` of the CAs that sign etcd's server certificate: speak TLS")
	fs.StringVar(&f.client.Cert, "etcd-cert", "", "client certificate `FILE` (with -etcd-key)")
	fs.StringVar(&f.client.Key, "etcd-key", "", "the -etcd-cert's private key `FILE`")
	fs.StringVar(&f.client.User, "etcd-user", "", "etcd user (with -etcd-password-file)")
	fs.StringVar(&f.client.PasswordFile, "etcd-password-file", "", "`FILE` holding the -etcd-user's password")
	fs.StringVar(&f.backupTime, "backup-time", "", "when the snapshot was saved, RFC 3339 (2026-12-05T04:00:00Z); required")
	fs.BoolVar(&f.force, "force", false, "record over an epoch of another backup time (a later restore)")
}

// parse checks the flags and returns the backup time.
func (f *etcdRestoredFlags) parse(now time.Time) (time.Time, error) {
	for _, ep := range strings.Split(f.endpoints, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			f.client.Endpoints = append(f.client.Endpoints, ep)
		}
	}
	if len(f.client.Endpoints) == 0 {
		return time.Time{}, errors.New("-etcd-endpoints: required")
	}
	if !strings.HasSuffix(f.prefix, "/") {
		return time.Time{}, fmt.Errorf("-etcd-prefix %q: must end in '/' (as idemd's)", f.prefix)
	}
	t, err := time.Parse(time.RFC3339, f.backupTime)
	if err != nil {
		return time.Time{}, fmt.Errorf("-backup-time %q: want RFC 3339, 2026-12-05T04:00:00Z: %v", f.backupTime, err)
	}
	if t.After(now) {
		return time.Time{}, fmt.Errorf("-backup-time %s: in the future (now %s)", t.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return t, nil
}

func runEtcdRestored(c command, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(c, stderr)
	var f etcdRestoredFlags
	f.define(fs)
	pos, err := parseAnywhere(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	now := time.Now()
	backup, err := f.parse(now)
	if err == nil && len(pos) > 0 {
		err = fmt.Errorf("no arguments, got %q", pos)
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemctl etcd-restored: %v\n", err)
		return exitUsage
	}
	return recordEtcdRestore(f, etcdstore.RestoreEpoch{RestoredAt: now, BackupTime: backup}, stdout, stderr)
}

// recordEtcdRestore writes the epoch and says which one is in force.
func recordEtcdRestore(f etcdRestoredFlags, e etcdstore.RestoreEpoch, stdout, stderr io.Writer) int {
	cfg, err := f.client.Config()
	if err != nil {
		fmt.Fprintf(stderr, "idemctl etcd-restored: %v\n", err)
		return exitUsage
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "idemctl etcd-restored: etcd %v: %v\n", f.client.Endpoints, err)
		return exitUsage
	}
	defer cli.Close()
	st, err := etcdstore.New(cli, etcdstore.Options{Prefix: f.prefix})
	if err != nil {
		fmt.Fprintf(stderr, "idemctl etcd-restored: %v\n", err)
		return exitUsage
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), etcdRecordTimeout)
	defer cancel()
	got, wrote, err := etcdstore.RecordRestore(ctx, st, e, f.force)
	if err != nil {
		fmt.Fprintf(stderr, "idemctl etcd-restored: record %s%s: %v\n", f.prefix, etcdstore.RestoreKey, err)
		return exitUsage
	}
	desc := fmt.Sprintf("restored_at %s, backup_time %s", got.RestoredAt.Format(time.RFC3339), got.BackupTime.Format(time.RFC3339))
	switch {
	case wrote:
		fmt.Fprintf(stdout, "recorded the restore epoch under %s: %s; start (or restart) every idemd now\n", f.prefix, desc)
	case got.BackupTime.Equal(e.BackupTime):
		fmt.Fprintf(stdout, "the restore epoch under %s is recorded already: %s (unchanged)\n", f.prefix, desc)
	default:
		fmt.Fprintf(stderr, "idemctl etcd-restored: another restore is recorded under %s: %s; to record a later restore, run with -force\n", f.prefix, desc)
		return exitDamage
	}
	return exitOK
}
