// Command idemd serves Idem over HTTP on an embedded data directory.
//
//	go run ./cmd/idemd                 # 127.0.0.1:8420, data in ./data
//	go run ./cmd/idemd -h              # every flag
//
// SIGTERM or SIGINT shut it down gracefully: stop accepting, let in-flight
// requests finish (up to -shutdown-timeout), stop the background loops and
// close the engine cleanly. Receipts still in flight keep their leases; the
// next start adopts them at once (new incarnation).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/wal"
)

type config struct {
	addr            string
	data            string
	tokens          string
	node            string
	leaseTTL        time.Duration
	renewInterval   time.Duration
	retention       time.Duration
	legacyOwner     string
	maintainEvery   time.Duration
	cleanEvery      time.Duration
	executor        int
	waitMax         time.Duration
	bodyMax         int64
	requestTimeout  time.Duration
	headerTimeout   time.Duration
	shutdownTimeout time.Duration
	checkpointBytes int64
	segmentBytes    int
	separateDecide  bool
	logLevel        string
	logFormat       string
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("idemd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8420", "address to listen on")
	fs.StringVar(&c.data, "data", "./data", "data directory (created if missing; one process at a time)")
	fs.StringVar(&c.tokens, "tokens", "", "tokens file: one `principal:token` per line, # comments; without it every request is the single principal \"anonymous\"")
	fs.StringVar(&c.node, "node", "node-0", "owner ID of this process; its incarnation is bumped at every start")
	fs.DurationVar(&c.leaseTTL, "lease-ttl", 10*time.Second, "lease TTL of a receipt's owner; a successor may adopt after it lapses")
	fs.DurationVar(&c.renewInterval, "renew-interval", 0, "lease renewal interval (0 or more than lease-ttl/3 means lease-ttl/3)")
	fs.DurationVar(&c.retention, "retention", 24*time.Hour, "how long terminal receipts are kept for replay")
	fs.StringVar(&c.legacyOwner, "legacy-table-owner", "anonymous", "principal that owns the tables created before tables had owners (moved to it at start)")
	fs.DurationVar(&c.maintainEvery, "maintain-interval", 0, "how often the recovery pass runs, the first time at most 1s after start (0: lease-ttl/2; negative: never)")
	fs.DurationVar(&c.cleanEvery, "clean-interval", 0, "how often expired receipts are cleaned, the first time at most 1s after start (0: 1m; negative: never)")
	fs.IntVar(&c.executor, "executor", 256, "maximum keyed batches executing at once; beyond it receipts wait pending (429)")
	fs.DurationVar(&c.waitMax, "wait-max", 30*time.Second, "maximum honoured Prefer: wait=N")
	fs.Int64Var(&c.bodyMax, "max-body", 1<<20, "maximum request body in bytes (larger: 413)")
	fs.DurationVar(&c.requestTimeout, "request-timeout", 60*time.Second, "maximum time to handle one request")
	fs.DurationVar(&c.headerTimeout, "header-timeout", 5*time.Second, "maximum time to read request headers")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a graceful shutdown waits for in-flight requests")
	fs.Int64Var(&c.checkpointBytes, "checkpoint-bytes", 64<<20, "WAL bytes between automatic checkpoints (negative disables)")
	fs.IntVar(&c.segmentBytes, "wal-segment-bytes", 8<<20, "size of one WAL segment file; truncation after a checkpoint removes whole segments")
	fs.BoolVar(&c.separateDecide, "separate-decide", false, "write a new receipt's decision and terminal envelope as a second fsync after its receipt and prepares, instead of chaining both into one")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.requestTimeout <= c.waitMax {
		c.requestTimeout = c.waitMax + 10*time.Second
	}
	return c, nil
}

func newLogger(c config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("-log-format must be text or json")
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "idemd:", err)
			os.Exit(1)
		}
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(c, stderr)
	if err != nil {
		return err
	}
	slog.SetDefault(log)
	var tokens map[string]string
	if c.tokens != "" {
		f, err := os.Open(c.tokens)
		if err != nil {
			return err
		}
		tokens, err = api.ParseTokens(f)
		f.Close()
		if err != nil {
			return err
		}
		log.Info("auth: bearer tokens", "file", c.tokens, "tokens", len(tokens))
	} else {
		log.Warn("auth: no -tokens file: every request is the single principal \"anonymous\"")
	}
	db, err := engine.Open(c.data, engine.Options{CheckpointLogBytes: c.checkpointBytes, Logger: log,
		WAL: wal.Options{SegmentBytes: c.segmentBytes}})
	if err != nil {
		return fmt.Errorf("open %s: %w", c.data, err)
	}
	defer db.Close()
	svc, err := receipt.Open(ctx, db, receipt.Options{
		Node: c.node, LeaseTTL: c.leaseTTL, RenewInterval: c.renewInterval, Retention: c.retention,
		MaintainInterval: c.maintainEvery, CleanInterval: c.cleanEvery, LegacyTableOwner: c.legacyOwner,
		ExecutorMax: c.executor, WaitMax: c.waitMax, SeparateDecide: c.separateDecide, Logger: log,
	})
	if err != nil {
		return err
	}
	defer svc.Close()
	srv := &http.Server{
		Handler: crashOnPanic(api.New(svc, api.Options{Tokens: tokens, BodyBytesMax: c.bodyMax, RequestTimeout: c.requestTimeout,
			EngineStats: db.Stats, Health: db.Health, Logger: log}), stderr),
		ReadHeaderTimeout: c.headerTimeout,
		ReadTimeout:       c.requestTimeout,
		WriteTimeout:      c.requestTimeout + 5*time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Catch signals before announcing the address: a supervisor may signal
	// as soon as it reads the line, and the default action would kill the
	// process without a graceful shutdown.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	log.Info("idemd: listening", "addr", ln.Addr().String(), "data", c.data, "owner", svc.Owner().String())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case sig := <-sigs:
		log.Info("idemd: shutting down", "signal", sig.String())
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("idemd: in-flight requests did not finish; their receipts stay leased and the next start adopts them", "err", err)
	}
	svc.Close()
	if err := db.Close(); err != nil && !errors.Is(err, engine.ErrClosed) {
		return err
	}
	log.Info("idemd: stopped cleanly")
	return nil
}

// crashOnPanic turns a panic while serving a request into a process crash,
// as a panic anywhere else would be. net/http would recover it and carry
// on; but a panic means a broken invariant, and carrying on with a half-done
// request's in-memory state is worse than restarting: recovery rebuilds
// everything from the store, and leases hand the work to the next
// incarnation at once.
func crashOnPanic(h http.Handler, stderr io.Writer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v) // net/http's own way to abort a response
			}
			fmt.Fprintf(stderr, "panic: %v\n\n%s", v, debug.Stack())
			os.Exit(2)
		}()
		h.ServeHTTP(w, r)
	})
}
