package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	etcdstore "github.com/idemdb/idem/store/etcd"
)

// stampedVersion is set by `make build` (-ldflags -X main.stampedVersion=…,
// from git describe), so the release binary names its commit even where
// the toolchain stamps no VCS information (GOFLAGS=-buildvcs=false).
var stampedVersion string

// buildVersion is the version make build stamped, or the main module's
// version and VCS revision as the Go toolchain stamped them; "devel" when
// there is neither (go run, go test, a build outside a module version).
func buildVersion() (version, revision string) {
	if stampedVersion != "" {
		return stampedVersion, ""
	}
	version = "devel"
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return version, ""
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		version = v
	}
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if revision != "" && modified {
		revision += "+dirty"
	}
	return version, revision
}

// versionLine is what -version prints.
func versionLine() string {
	v, rev := buildVersion()
	if rev != "" {
		v += " " + rev
	}
	return fmt.Sprintf("idemd %s %s", v, runtime.Version()) + formatLines()
}

// allFormats are every format this build writes and reads: the data
// directory's, the records', the etcd values' and the signed texts between
// nodes.
func allFormats() []store.Format {
	return slices.Concat(engine.Formats(), receipt.Formats(), etcdstore.Formats(), shardRecordFormats(), api.Formats())
}

// formatLines are the formats this build writes and reads, one line each
// after the version (docs/upgrading.md): the data directory's
// (engine.Formats) and the records under either store (receipt.Formats).
func formatLines() string {
	var b strings.Builder
	name, writes := 0, 0
	for _, f := range allFormats() {
		name, writes = max(name, len(f.Name)), max(writes, len(f.Writes))
	}
	for _, f := range allFormats() {
		fmt.Fprintf(&b, "\n  %-*s writes %-*s reads %s", name, f.Name, writes, f.Writes, strings.Join(f.Reads, " "))
	}
	return b.String()
}

func newLogger(c config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.logLevel)) // validated by parseFlags
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationsAsStrings}
	if c.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// durationsAsStrings writes a time.Duration as Go writes it ("1.5s"): the
// JSON handler would write integer nanoseconds, which nobody reads right.
func durationsAsStrings(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// logStart reports the version and every setting in force, defaults
// applied, before anything is opened: a start that then fails still says
// what it tried.
func logStart(log *slog.Logger, c config) {
	version, revision := buildVersion()
	attrs := []any{"version", version}
	if revision != "" {
		attrs = append(attrs, "revision", revision)
	}
	log.Info("idemd: starting", append(attrs, "go", runtime.Version(), "pid", os.Getpid())...)
	tokens := c.tokens
	if tokens == "" {
		tokens = "none (every request is \"anonymous\")"
	}
	log.Info("idemd: settings",
		"addr", c.addr, "data", c.data, "tokens", tokens, "node", c.node,
		"lease_ttl", c.leaseTTL, "renew_interval", c.renewInterval, "retention", c.retention, "tombstone_retention", c.tombRetention, "admins", c.admins,
		"legacy_table_owner", c.legacyOwner,
		"maintain_interval", interval(c.maintainEvery), "clean_interval", interval(c.cleanEvery),
		"executor", c.executor, "wait_max", c.waitMax, "session_ttl_max", c.sessionTTLMax, "sessions_max", c.sessionsMax,
		"principal_sessions_max", c.quotaSessions, "principal_inflight_max", c.quotaInflight, "max_body", c.bodyMax,
		"request_timeout", c.requestTimeout, "header_timeout", c.headerTimeout,
		"write_timeout", c.requestTimeout+writeTimeoutOverRequest, "idle_timeout", idleTimeout,
		"shutdown_timeout", c.shutdownTimeout, "checkpoint_bytes", checkpointSetting(c.checkpointBytes), "value_log", c.valueLog,
		"wal_segment_bytes", c.segmentBytes, "wal_no_preallocate", c.walPlain, "map_checkpoints", c.mapCheckpoints, "separate_decide", c.separateDecide,
		"log_level", c.logLevel, "log_format", c.logFormat, "store", c.store, "etcd_shards", shardsSetting(c), "tls", tlsSetting(c))
}

// shardsSetting is -etcd-shards as the log shows it: the map's file,
// version and shards, or none.
func shardsSetting(c config) slog.Value {
	if c.shardMap == nil {
		return slog.StringValue("none")
	}
	return slog.StringValue(fmt.Sprintf("%s (version %d, %d shards)", c.etcdShards, c.shardMap.Version, len(c.shardMap.Shards)))
}

// interval is a loop interval as the log shows it: negative is "never".
func interval(d time.Duration) slog.Value {
	if d < 0 {
		return slog.StringValue("never")
	}
	return slog.DurationValue(d)
}

func checkpointSetting(n int64) slog.Value {
	if n < 0 {
		return slog.StringValue("disabled")
	}
	return slog.Int64Value(n)
}

// checkFailpoints refuses a GO_FAILPOINTS (spec) that names a failpoint
// this build does not have: it would arm nothing, and a fault run would
// test nothing. The release build has no failpoints at all; there
// GO_FAILPOINTS does nothing, which a set one is warned of.
func checkFailpoints(log *slog.Logger, spec string) error {
	if !fault.Compiled {
		if spec != "" {
			log.Warn("idemd: "+fault.EnvVar+" is set but this is the release build (-tags nofailpoint): it arms nothing", "go_failpoints", spec)
		}
		return nil
	}
	if err := fault.CheckEnv(spec); err != nil {
		return usagef("%v", err)
	}
	if spec != "" {
		log.Warn("idemd: failpoints armed by "+fault.EnvVar, "go_failpoints", spec)
	}
	return nil
}

// openTimes are how long each part of the open took.
type openTimes struct{ engine, receipts time.Duration }

// logRecovered reports what the open found: the store, the log it
// replayed, and how long it all took.
func logRecovered(log *slog.Logger, db *engine.DB, t openTimes) {
	var attrs []any
	if db != nil { // the local engine's own recovery; etcd has none of ours
		st := db.Stats()
		attrs = append(attrs, "keys", st.Keys, "applied", uint64(st.Applied), "checkpoint", uint64(st.Recovery.FromCheckpoint),
			"replayed_entries", st.Recovery.ReplayedEntries, "replayed_bytes", st.Recovery.ReplayedBytes,
			"chain_bytes", st.Recovery.ChainBytes, "mapped_bytes", st.Recovery.MappedBytes, "open_log", st.Recovery.Phases.LogOpen,
			"open_chain", st.Recovery.Phases.ChainLoad, "open_replay", st.Recovery.Phases.Replay)
	}
	log.Info("idemd: recovered", append(attrs,
		"open_engine", t.engine, "open_receipts", t.receipts, "open_total", t.engine+t.receipts)...)
}

// logCounted reports the receipts by state (countReceipts) and how long
// counting them took.
func logCounted(log *slog.Logger, sum receipt.Summary, took time.Duration) {
	log.Info("idemd: receipts counted",
		"receipts_pending", sum.Pending, "receipts_started", sum.Started, "receipts_terminal", sum.Terminal,
		"receipts_with_debt", sum.Debt, "receipts_to_adopt", sum.Pending+sum.Started+sum.Debt,
		"receipts_unreadable", sum.Unreadable, "receipts_partial", sum.Partial, "sessions_open", sum.SessionsOpen,
		"count_receipts", took)
}

// loadTokens reads the -tokens file. An empty one is refused: every
// request would be unauthenticated, which no one means. A file that group
// or others may read draws a warning: its tokens are every principal's
// credentials.
func loadTokens(path string, log *slog.Logger) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the message already
		}
		return nil, fmt.Errorf("-tokens %s: cannot open: %w", path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().Perm()&tokensFileOthersMask != 0 {
		log.Warn("auth: the tokens file is readable by group or others; chmod 600 it",
			"file", path, "mode", fmt.Sprintf("%#o", st.Mode().Perm()))
	}
	tokens, err := api.ParseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("-tokens %s: %w", path, err)
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("-tokens %s: no principal:token line (only blank lines and comments): every request would be refused", path)
	}
	return tokens, nil
}

// tokensFileOthersMask are the permission bits of a tokens file that let
// someone other than its owner read or change it.
const tokensFileOthersMask = 0o077
