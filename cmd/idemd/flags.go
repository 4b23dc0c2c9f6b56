package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	etcdstore "github.com/idemdb/idem/store/etcd"
	"github.com/idemdb/idem/wal"
)

type config struct {
	addr            string
	data            string
	backupDir       string
	tokens          string
	admins          string
	node            string
	leaseTTL        time.Duration
	renewInterval   time.Duration
	retention       time.Duration
	tombRetention   time.Duration
	legacyOwner     string
	maintainEvery   time.Duration
	cleanEvery      time.Duration
	executor        int
	waitMax         time.Duration
	sessionTTLMax   time.Duration
	sessionsMax     int
	quotaSessions   int // -principal-sessions-max (receipt/quota.go); 0 until validateQuotas derives it
	quotaInflight   int // -principal-inflight-max; likewise
	bodyMax         int64
	requestTimeout  time.Duration
	bodyTimeout     time.Duration
	maxConns        int
	maxIdleConns    int
	headerTimeout   time.Duration
	shutdownTimeout time.Duration
	checkpointBytes int64
	valueLog        bool
	segmentBytes    int
	walPlain        bool
	mapCheckpoints  bool
	walLinger       time.Duration
	separateDecide  bool
	logLevel        string
	logFormat       string
	version         bool

	store           string   // storeLocal or storeEtcd
	etcdEndpoints   []string // parsed from -etcd-endpoints
	etcdPrefix      string
	etcdDialTimeout time.Duration
	etcdCA          string
	etcdCert        string
	etcdKey         string
	etcdUser        string
	etcdPassword    string  // the -etcd-password-file's path
	etcdQuota       int64   // -etcd-quota-bytes: 0, the members' own
	etcdHighWater   float64 // -etcd-high-water: share of the quota
	etcdSpaceEvery  time.Duration
	etcdShards      string // the -etcd-shards file's path
	// shardMap is the -etcd-shards file, checked (nil without it), and
	// targets the clusters the store is on: its shards, or the one of the
	// -etcd-* flags.
	shardMap      *shardMap
	targets       []etcdTarget
	advertise     string
	clusterSecret string // the -cluster-secret-file's path

	tlsCert     string // -tls-cert: serve HTTPS
	tlsKey      string
	tlsClientCA string // -tls-client-ca: mutual TLS
	peerCA      string // -peer-ca: verify peers' https -advertise URLs
}

// usageError is a command line idemd cannot run with: main exits 2 for it
// (as the flag package does for a flag it cannot parse), and 1 for an error
// met while running.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// Bounds of the flags' values (see validate).
const (
	// leaseTTLMin keeps lease-ttl/3, the renewal tick, and lease-ttl/5, the
	// safety margin, positive and longer than a slow fsync.
	leaseTTLMin = 100 * time.Millisecond
	// loopIntervalMin is the shortest renewal, recovery or cleaner interval
	// one may ask for: a shorter one spins the loop on its own writes.
	loopIntervalMin = 10 * time.Millisecond
)

// Defaults that idemd applies itself, so that the start-up log shows what
// is in force (the libraries would apply the same ones to a zero value).
const (
	cleanIntervalDefault = time.Minute
	// requestTimeoutOverWait is how far -request-timeout is raised above
	// -wait-max when it is not already longer: a request that waits the
	// whole -wait-max must still have time to answer.
	requestTimeoutOverWait = 10 * time.Second
	// writeTimeoutOverRequest lets a request that used its whole
	// -request-timeout still write its answer.
	writeTimeoutOverRequest = 5 * time.Second
	// idleTimeout closes a keep-alive connection nobody uses.
	idleTimeout = 2 * time.Minute
	// headerBytesMax bounds a request's header fields (net/http's default,
	// named): beyond it the answer is 431 header_fields_too_large.
	headerBytesMax = 1 << 20
	// walLingerMax bounds -wal-group-linger: a wait much longer than an
	// fsync would only add latency.
	walLingerMax = 10 * time.Millisecond
)

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("idemd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.defineServerFlags(fs)
	endpoints := c.defineStoreFlags(fs)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return c, err
		}
		return c, &usageError{err.Error()} // the flag package has printed it with the usage
	}
	if fs.NArg() > 0 {
		return c, usagef("unexpected argument %q: idemd takes flags only (-h lists them)", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := c.parseStore(*endpoints, set); err != nil {
		return c, err
	}
	if err := c.validate(); err != nil {
		return c, err
	}
	c.applyDefaults()
	return c, nil
}

// defineServerFlags defines the flags of the server, its limits and its
// engine on fs.
func (c *config) defineServerFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8420", "address to listen on, host:port (port 0: any free port)")
	fs.StringVar(&c.data, "data", "./data", "data directory (created if missing; one process at a time)")
	fs.StringVar(&c.backupDir, "backup-dir", "", "directory operators' backups go to (POST /v1/admin/backup, idemctl backup -server), each a plain name under it; a route never writes elsewhere. Default empty: the route answers 501, since where backups may go is the operator's choice (not under -data; -store local only)")
	fs.StringVar(&c.admins, "admins", "", "comma-separated principals that may act as operators: list every principal's receipts and resolve a stuck one (needs -tokens; without tokens the single principal is an operator)")
	fs.StringVar(&c.tokens, "tokens", "", "read bearer tokens from `FILE`, one principal:token per line, # comments, each token at least 16 bytes (shorter ones are guessable); SIGHUP reloads it; without it every request is the single principal \"anonymous\"")
	fs.StringVar(&c.node, "node", "node-0", fmt.Sprintf("owner ID of this process, 1..%d visible ASCII characters but '/'; its incarnation is bumped at every start", lease.NodeIDBytesMax))
	fs.DurationVar(&c.leaseTTL, "lease-ttl", 10*time.Second, fmt.Sprintf("lease TTL of a receipt's owner, at least %v; a successor may adopt after it lapses", leaseTTLMin))
	fs.DurationVar(&c.renewInterval, "renew-interval", 0, "lease renewal interval (0 or more than lease-ttl/3 means lease-ttl/3)")
	fs.DurationVar(&c.retention, "retention", 24*time.Hour, "how long terminal receipts are kept for replay")
	fs.DurationVar(&c.tombRetention, "tombstone-retention", receipt.TombstoneRetentionDefault, "how long after its completion a key stays protected: past -retention its tombstone answers 409 idempotency_key_expired instead of executing it again (0: no tombstones, an expired key is a new request)")
	fs.StringVar(&c.legacyOwner, "legacy-table-owner", "anonymous", "principal that owns the tables created before tables had owners (moved to it at start)")
	fs.DurationVar(&c.maintainEvery, "maintain-interval", 0, "how often the recovery pass runs, the first time at most 1s after start (0: lease-ttl/2; negative: never)")
	fs.DurationVar(&c.cleanEvery, "clean-interval", 0, "how often expired receipts are cleaned, the first time at most 1s after start (0: 1m; negative: never)")
	fs.IntVar(&c.executor, "executor", 256, "maximum keyed batches executing at once; beyond it receipts wait pending (429)")
	fs.DurationVar(&c.waitMax, "wait-max", 30*time.Second, "maximum honoured Prefer: wait=N")
	fs.DurationVar(&c.sessionTTLMax, "session-ttl-max", receipt.SessionTTLMaxDefault, "longest TTL an interactive session may ask for (whole seconds)")
	fs.IntVar(&c.sessionsMax, "sessions-max", receipt.SessionsOpenMaxDefault, "maximum interactive sessions open on this node at once (beyond it: 429)")
	fs.IntVar(&c.quotaSessions, "principal-sessions-max", 0, fmt.Sprintf("maximum interactive sessions one principal may have open on this node, 1..-sessions-max; beyond it that principal alone gets 429, with Retry-After its own earliest session expiry (0: -sessions-max/%d, so several tenants at their quota still leave room)", receipt.QuotaShareDivisor))
	fs.IntVar(&c.quotaInflight, "principal-inflight-max", 0, fmt.Sprintf("maximum requests of one principal inside the service at once (keyed batches and session steps, executing or waiting for a slot or a Prefer: wait), 1..-executor; beyond it that principal alone gets 429 (0: -executor/%d, so one tenant holds at most a quarter of the executor)", receipt.QuotaShareDivisor))
	fs.Int64Var(&c.bodyMax, "max-body", 1<<20, "maximum request body in bytes (larger: 413)")
	fs.DurationVar(&c.requestTimeout, "request-timeout", 60*time.Second, "maximum time to handle one request (raised to wait-max + 10s if not longer than wait-max)")
	fs.DurationVar(&c.headerTimeout, "header-timeout", 5*time.Second, "maximum time to read request headers")
	fs.DurationVar(&c.bodyTimeout, "body-timeout", 10*time.Second, "maximum time to read a request body once its handler starts (slower: 408 request_timeout, connection closed); the default lets a 100 KiB/s client send a 1 MiB body")
	fs.IntVar(&c.maxConns, "max-connections", 0, fmt.Sprintf("maximum client connections open at once; beyond it a connection is answered 503 overloaded and closed (0: the open-files limit less max(%d, an eighth) kept for the store, at most %d)", descriptorReserveMin, connectionsDefaultMax))
	fs.IntVar(&c.maxIdleConns, "max-idle-connections", 0, "maximum keep-alive connections idle at once; one going idle beyond it is closed (0: a quarter of -max-connections)")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a graceful shutdown waits for in-flight requests")
	fs.Int64Var(&c.checkpointBytes, "checkpoint-bytes", 64<<20, "WAL bytes between automatic checkpoints (negative disables); a restart replays at most about twice this plus a segment, however large the store (default 64 MiB: under a second of replay)")
	fs.BoolVar(&c.valueLog, "value-log", true, "keep terminal receipts and tombstones in the on-disk value log once checkpointed, RAM holding their keys and a pointer (false: every value in RAM; values already there stay readable)")
	fs.IntVar(&c.segmentBytes, "wal-segment-bytes", 8<<20, "size of one WAL segment file; truncation after a checkpoint removes whole segments")
	fs.BoolVar(&c.mapCheckpoints, "map-checkpoints", true, "map the checkpoint files a start loads instead of reading them into memory: in a crash loop a GB of checkpoints loads in about 0.7 s instead of 1.0 (docs/engine.md); a file a merge deletes keeps its disk space until the process exits (false: read them, freeing that space at once)")
	fs.BoolVar(&c.walPlain, "wal-no-preallocate", false, "write WAL segments as growing files instead of over zeros written beforehand (slower fsyncs; no spare segment on disk)")
	fs.DurationVar(&c.walLinger, "wal-group-linger", wal.DefaultGroupLinger, "how long the WAL writer may hold a group commit open for more requests while every core is busy, at most "+walLingerMax.String()+" (0: never)")
	fs.BoolVar(&c.separateDecide, "separate-decide", false, "test flag (default false: both chained into one fsync wait, with the same records): write a new receipt's decision and terminal envelope as a second fsync after its receipt and prepares, so that process tests can crash a receipt between the two writes")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	fs.StringVar(&c.store, "store", storeLocal, "where receipts, leases and tables live: local (the engine in -data) or etcd (a cluster shared by every node; see -etcd-*)")
}

// defineStoreFlags defines the flags of -store, etcd, forwarding and TLS
// on fs; -etcd-endpoints is parsed by parseStore.
func (c *config) defineStoreFlags(fs *flag.FlagSet) *string {
	endpoints := fs.String("etcd-endpoints", "", "with -store etcd: the cluster's client endpoints, host:port,host:port,…")
	fs.StringVar(&c.etcdPrefix, "etcd-prefix", "/idem/", "with -store etcd: the key prefix of this deployment (every node of it uses the same; deployments sharing a cluster use different ones)")
	fs.DurationVar(&c.etcdDialTimeout, "etcd-dial-timeout", 5*time.Second, "with -store etcd: how long a start waits to reach the cluster")
	fs.StringVar(&c.etcdCA, "etcd-ca", "", "with -store etcd: `FILE` of the CA certificates that sign etcd's server certificate: the client speaks TLS (endpoints https://…)")
	fs.StringVar(&c.etcdCert, "etcd-cert", "", "with -store etcd: client certificate `FILE` for etcd's client-certificate auth (with -etcd-key)")
	fs.StringVar(&c.etcdKey, "etcd-key", "", "with -store etcd: the -etcd-cert's private key `FILE`")
	fs.StringVar(&c.etcdUser, "etcd-user", "", "with -store etcd: etcd user to authenticate as (with -etcd-password-file)")
	fs.StringVar(&c.etcdPassword, "etcd-password-file", "", "with -store etcd: `FILE` holding the -etcd-user's password (one line)")
	fs.Int64Var(&c.etcdQuota, "etcd-quota-bytes", 0, "with -store etcd: the cluster's --quota-backend-bytes, which -etcd-high-water is a share of; 0 (default) takes what the members report (etcd 3.6 and later), else etcd's default 2 GiB")
	fs.DurationVar(&c.etcdSpaceEvery, "etcd-space-interval", etcdstore.DefaultSpaceInterval, "with -store etcd: how often each member is asked its backend size (one Status call each); default 1s, short enough that the writes of one interval fit the room above -etcd-high-water")
	fs.Float64Var(&c.etcdHighWater, "etcd-high-water", etcdstore.DefaultHighWater, "with -store etcd: the share of the quota above which new keys and sessions are answered 503 store_full, so that work already started, session commits and cleanup finish before etcd's NOSPACE alarm refuses every write; default 0.8 leaves the last 20 % to them")
	fs.StringVar(&c.etcdShards, "etcd-shards", "", fmt.Sprintf("with -store etcd: `FILE` (JSON) of the shard map, {\"version\": n, \"shards\": [{\"name\", \"endpoints\", \"prefix\", \"ca\", \"cert\", \"key\", \"user\", \"password_file\"}, …]}: 1..%d etcd clusters, each table on the one hash(principal, table) names (docs/cluster.md \"Shards\"); in place of -etcd-endpoints and its TLS and auth flags. Every node of a deployment uses the same map; a deployment holding data refuses another. Default: none, the one cluster of -etcd-endpoints", api.StoreShardsMax))
	fs.StringVar(&c.clusterSecret, "cluster-secret-file", "", fmt.Sprintf("with -store etcd: `FILE` holding the secret shared by every node of the deployment (at least %d bytes; a trailing line break is not part of it), which authenticates requests forwarded between nodes; without it forwarding is off (a request for work another node holds is answered here) and no request is taken for a forwarded one", api.ClusterSecretBytesMin))
	fs.StringVar(&c.advertise, "advertise", "", "with -store etcd: the URL this node's peers reach it at, http://host:port or https://host:port, written in its node record")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "serve HTTPS on -addr with this certificate chain `FILE` (PEM, with -tls-key; TLS 1.2 or later); default: plain HTTP")
	fs.StringVar(&c.tlsKey, "tls-key", "", "the -tls-cert's private key `FILE` (PEM)")
	fs.StringVar(&c.tlsClientCA, "tls-client-ca", "", "with -tls-cert: mutual TLS: refuse, in the handshake, every client without a certificate signed by a CA of this `FILE` (PEM); on -store etcd this node then presents its -tls-cert to the peers it forwards to. Default: no client certificate asked")
	fs.StringVar(&c.peerCA, "peer-ca", "", "with -store etcd: verify the certificates of peers whose -advertise is https against the CAs of this `FILE` (PEM); default: the system's roots")
	return endpoints
}

// validate checks every flag against its range. A zero is refused where it
// would mean nothing (or silently some default the usage does not name).
func (c *config) validate() error {
	for _, check := range []func() error{c.validateIdentity, c.validateRetention, c.validateLimits,
		c.validateStorage, c.validateLogging, c.validTLS} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateIdentity checks the address, data dir, node, leases and operators.
func (c *config) validateIdentity() error {
	if err := validAddr(c.addr); err != nil {
		return err
	}
	if c.data == "" {
		return usagef("-data %q: must name a directory", c.data)
	}
	if err := validNode(c.node); err != nil {
		return err
	}
	if c.leaseTTL < leaseTTLMin {
		return usagef("-lease-ttl %v: must be at least %v", c.leaseTTL, leaseTTLMin)
	}
	if c.renewInterval != 0 && c.renewInterval < loopIntervalMin {
		return usagef("-renew-interval %v: must be 0 (lease-ttl/3) or at least %v", c.renewInterval, loopIntervalMin)
	}
	if c.admins != "" && c.tokens == "" {
		return usagef("-admins %q: needs -tokens (without tokens the single principal is an operator already)", c.admins)
	}
	for _, p := range adminList(c.admins) {
		if p == "" || strings.TrimSpace(p) != p || strings.Contains(p, ":") {
			return usagef("-admins %q: each must be a principal: non-empty, no ':', no surrounding spaces", c.admins)
		}
	}
	return nil
}

// validateRetention checks retention, tombstones, the legacy owner and the loops' intervals.
func (c *config) validateRetention() error {
	if c.retention <= 0 {
		return usagef("-retention %v: must be positive", c.retention)
	}
	if c.tombRetention < 0 || (c.tombRetention > 0 && c.tombRetention <= c.retention) {
		// Not above the retention it would protect nothing the envelope
		// does not: say so instead of silently writing no tombstones.
		return usagef("-tombstone-retention %v: must be 0 (off) or longer than -retention %v", c.tombRetention, c.retention)
	}
	if p := c.legacyOwner; p == "" || strings.TrimSpace(p) != p || strings.Contains(p, ":") {
		// Otherwise no tokens line could name the principal: its tables
		// would be unreachable.
		return usagef("-legacy-table-owner %q: must be a principal: non-empty, no ':', no surrounding spaces", p)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"-maintain-interval", c.maintainEvery}, {"-clean-interval", c.cleanEvery}} {
		if f.d > 0 && f.d < loopIntervalMin {
			return usagef("%s %v: must be 0 (default), negative (never) or at least %v", f.name, f.d, loopIntervalMin)
		}
	}
	return nil
}

// validateLimits checks the executor, sessions, quotas, bodies, timeouts and connections.
func (c *config) validateLimits() error {
	if c.executor < 1 {
		return usagef("-executor %d: must be at least 1", c.executor)
	}
	if c.sessionTTLMax < time.Second || c.sessionTTLMax%time.Second != 0 {
		return usagef("-session-ttl-max %v: must be whole seconds, at least 1s", c.sessionTTLMax)
	}
	if c.sessionsMax < 1 {
		return usagef("-sessions-max %d: must be at least 1", c.sessionsMax)
	}
	if err := c.validateQuotas(); err != nil {
		return err
	}
	if c.bodyMax < 1 {
		return usagef("-max-body %d: must be at least 1 byte", c.bodyMax)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"-wait-max", c.waitMax}, {"-request-timeout", c.requestTimeout}, {"-header-timeout", c.headerTimeout},
		{"-body-timeout", c.bodyTimeout}, {"-shutdown-timeout", c.shutdownTimeout}} {
		if f.d <= 0 {
			return usagef("%s %v: must be positive", f.name, f.d)
		}
	}
	if c.maxConns < 0 || c.maxIdleConns < 0 {
		return usagef("-max-connections %d, -max-idle-connections %d: must be 0 (default) or positive", c.maxConns, c.maxIdleConns)
	}
	return nil
}

// validateStorage checks the engine's checkpoints, log and backups.
func (c *config) validateStorage() error {
	if err := c.validateBackupDir(); err != nil {
		return err
	}
	if c.checkpointBytes == 0 {
		return usagef("-checkpoint-bytes 0: must be positive (bytes) or negative (disabled)")
	}
	if c.segmentBytes < 1 {
		return usagef("-wal-segment-bytes %d: must be at least 1", c.segmentBytes)
	}
	if c.walLinger < 0 || c.walLinger > walLingerMax {
		return usagef("-wal-group-linger %v: must be 0 (never) to %v", c.walLinger, walLingerMax)
	}
	return nil
}

// validateBackupDir refuses a backup dir on etcd (its snapshots are the
// backup) and one inside -data, which would put a second store in the
// first's directory.
func (c *config) validateBackupDir() error {
	if c.backupDir == "" {
		return nil
	}
	if c.store == storeEtcd {
		return usagef("-backup-dir %q: only with -store local (on etcd, back up with etcdctl snapshot save)", c.backupDir)
	}
	data, err1 := filepath.Abs(c.data)
	dir, err2 := filepath.Abs(c.backupDir)
	if err1 != nil || err2 != nil {
		return usagef("-backup-dir %q: cannot resolve it or -data %q", c.backupDir, c.data)
	}
	if rel, err := filepath.Rel(data, dir); err == nil && (rel == "." || !strings.HasPrefix(rel, "..")) {
		return usagef("-backup-dir %q: must not be -data %q or inside it", c.backupDir, c.data)
	}
	return nil
}

// validateLogging checks the log's level and format.
func (c *config) validateLogging() error {
	switch strings.ToLower(c.logLevel) {
	case "debug", "info", "warn", "error":
	default:
		return usagef("-log-level %q: must be debug, info, warn or error", c.logLevel)
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return usagef("-log-format %q: must be text or json", c.logFormat)
	}
	return nil
}

// validTLS checks the -tls-* flags against each other and -advertise. The
// files themselves are read at start (loadTLS), where a bad one stops it.
func (c *config) validTLS() error {
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return usagef("-tls-cert and -tls-key: give both or neither")
	}
	if c.tlsClientCA != "" && c.tlsCert == "" {
		return usagef("-tls-client-ca: mutual TLS needs TLS: give -tls-cert and -tls-key too")
	}
	if c.tlsCert != "" && c.store == storeEtcd && strings.HasPrefix(c.advertise, "http://") {
		// Peers would speak plain HTTP to a TLS port: every forward would
		// fail, and the node would look unreachable.
		return usagef("-advertise %q: this node serves HTTPS (-tls-cert): advertise https://host:port", c.advertise)
	}
	return nil
}

func validAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("-addr %q: must be host:port (%v)", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return usagef("-addr %q: the port must be a number 0..65535", addr)
	}
	return nil
}

// validNode applies lease.Register's rule (1..NodeIDBytesMax bytes) and
// keeps the ID a single key part: it is the <owner> of
// recov/v1/<owner>/<txn_id>, and it is printed in logs and /healthz.
func validNode(node string) error {
	if node == "" || len(node) > lease.NodeIDBytesMax {
		return usagef("-node %q: must be 1..%d bytes", node, lease.NodeIDBytesMax)
	}
	for i := 0; i < len(node); i++ {
		if b := node[i]; b <= ' ' || b > '~' || b == '/' {
			return usagef("-node %q: must be visible ASCII characters other than '/'", node)
		}
	}
	return nil
}

// applyDefaults replaces the values that stand for a default with the
// default, so that what the start-up log prints is what runs.
func (c *config) applyDefaults() {
	c.renewInterval = lease.ClampInterval(c.renewInterval, c.leaseTTL)
	if c.maintainEvery == 0 {
		c.maintainEvery = c.leaseTTL / 2
	}
	if c.cleanEvery == 0 {
		c.cleanEvery = cleanIntervalDefault
	}
	if c.requestTimeout <= c.waitMax {
		c.requestTimeout = c.waitMax + requestTimeoutOverWait
	}
	c.logLevel = strings.ToLower(c.logLevel)
}

// adminList splits -admins; nil when it is empty.
func adminList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// validateQuotas checks the per-principal quotas against the node-wide
// limits they divide, and derives the ones not given from them.
func (c *config) validateQuotas() error {
	switch {
	case c.quotaSessions == 0:
		c.quotaSessions = receipt.SessionsPerPrincipalDefault(c.sessionsMax)
	case c.quotaSessions < 1 || c.quotaSessions > c.sessionsMax:
		return usagef("-principal-sessions-max %d: must be 1..-sessions-max (%d), or 0 for the default", c.quotaSessions, c.sessionsMax)
	}
	switch {
	case c.quotaInflight == 0:
		c.quotaInflight = receipt.InflightPerPrincipalDefault(c.executor)
	case c.quotaInflight < 1 || c.quotaInflight > c.executor:
		return usagef("-principal-inflight-max %d: must be 1..-executor (%d), or 0 for the default", c.quotaInflight, c.executor)
	}
	return nil
}
