package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/receipt"
)

// daemon is a started idemd: listening, its store and service open.
type daemon struct {
	c   config
	log *slog.Logger
	ln  net.Listener
	// stores and svcs are each store shard's store and receipt service,
	// in the shard map's order (one of each without -etcd-shards); store
	// and svc are shard 0's.
	stores   []*servedStore
	svcs     []*receipt.Service
	store    *servedStore
	svc      *receipt.Service
	srv      *http.Server
	api      *api.Server
	inFlight atomic.Int64 // requests inside the handler now
}

// start opens everything idemd serves with. The listener comes first:
// opening the receipt service bumps the node's incarnation durably, and a
// start that cannot listen (the port is taken) must not burn one.
func start(ctx context.Context, c config, log *slog.Logger, stderr io.Writer) (_ *daemon, err error) {
	sec, err := loadSecrets(c, log)
	if err != nil {
		return nil, err
	}
	d := &daemon{c: c, log: log}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	limits, err := connLimits(c, log)
	if err != nil {
		return nil, err
	}
	if d.ln, err = net.Listen("tcp", c.addr); err != nil {
		return nil, fmt.Errorf("-addr %s: %w", c.addr, err)
	}
	if err := d.open(ctx); err != nil {
		return nil, err
	}
	d.api = api.NewSharded(d.svcs, api.Options{Tokens: sec.tokens, Admins: adminList(c.admins), BodyBytesMax: c.bodyMax,
		RequestTimeout: c.requestTimeout, BodyTimeout: c.bodyTimeout, StoreCollectors: d.collectors(), Health: d.health(),
		Forward: forwarding(c, sec.cluster, sec.tls.peer, log), Backup: backupFunc(c, d.store.db), Logger: log})
	d.serveWith(limits, sec.tls, stderr)
	return d, nil
}

// secrets are what start reads from the files the flags name before it
// listens: a bad one stops the start.
type secrets struct {
	tokens  map[string]string
	cluster []byte
	tls     tlsConfigs
}

func loadSecrets(c config, log *slog.Logger) (sec secrets, err error) {
	if c.tokens != "" {
		if sec.tokens, err = loadTokens(c.tokens, log); err != nil {
			return sec, err
		}
		log.Info("auth: bearer tokens", "file", c.tokens, "tokens", len(sec.tokens))
	} else {
		log.Warn("auth: no -tokens file: every request is the single principal \"anonymous\"")
	}
	if c.clusterSecret != "" {
		if sec.cluster, err = loadClusterSecret(c.clusterSecret, log); err != nil {
			return sec, err
		}
	}
	sec.tls, err = loadTLS(c)
	return sec, err
}

// open opens the stores and a receipt service on each, and logs what the
// open recovered and how long each step took.
func (d *daemon) open(ctx context.Context) (err error) {
	c, log := d.c, d.log
	var t openTimes
	began := time.Now()
	if d.stores, err = openStores(ctx, c, log); err != nil {
		return err
	}
	d.store = d.stores[0]
	t.engine, began = time.Since(began), time.Now()
	for i, st := range d.stores {
		svc, err := d.openService(ctx, st, i)
		if err != nil {
			return err
		}
		d.svcs = append(d.svcs, svc)
	}
	d.svc = d.svcs[0]
	t.receipts = time.Since(began)
	logRecovered(log, d.store.db, t)
	return nil
}

// countReceipts logs the receipts by state (receipt.Summary) once idemd
// serves: the non-terminal ones, and the terminal ones with unresolved
// intents, belong to earlier incarnations and are what the recovery passes
// adopt. It is a report, so it does not hold the start back: its scan
// walks every retained receipt, 63–95 ms at 957 k, time a start after a
// crash would otherwise not serve in (docs/engine.md, "What an open's time
// is made of"). Requests answered meanwhile may move a receipt between
// states.
func (d *daemon) countReceipts(ctx context.Context) {
	began := time.Now()
	var sum receipt.Summary
	for _, svc := range d.svcs {
		s, err := svc.Summary(ctx)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("idemd: receipts not counted", "err", err)
			}
			return
		}
		sum = addSummary(sum, s)
	}
	logCounted(d.log, sum, time.Since(began))
}

// startCounting runs countReceipts beside the server; the function it
// returns stops it and waits, before the services close.
func (d *daemon) startCounting(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.countReceipts(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// openService opens the receipt service of store shard i on st: the node
// registers there with an incarnation of its own, and runs its own leases,
// recovery and cleanup on it.
func (d *daemon) openService(ctx context.Context, st *servedStore, i int) (*receipt.Service, error) {
	c, log := d.c, d.log
	if st.name != "" {
		log = log.With("shard", st.name)
	}
	shard := 0
	if len(d.stores) > 1 {
		shard = i + 1 // session IDs name their shard (receipt.Options.SessionShard)
	}
	opts := receipt.Options{
		Node: c.node, Advertise: c.advertise, LeaseTTL: c.leaseTTL, RenewInterval: c.renewInterval, Retention: c.retention,
		TombstoneRetention: tombstoneOption(c.tombRetention), MaintainInterval: c.maintainEvery, CleanInterval: c.cleanEvery, LegacyTableOwner: c.legacyOwner,
		ExecutorMax: c.executor, WaitMax: c.waitMax, SessionTTLMax: c.sessionTTLMax, SessionsOpenMax: c.sessionsMax,
		SessionsPerPrincipalMax: c.quotaSessions, InflightPerPrincipalMax: c.quotaInflight, Logger: log,
		Restore: restoreFence(st, c.retention, log), SessionShard: shard,
		// Other nodes share an etcd store: contention with their batches is
		// re-planned (receipt/replan.go), not refused.
		ReplanContended: c.store == storeEtcd,
	}
	// -separate-decide is a test flag: the process tests crash a receipt
	// between its two writes (internal/testknobs).
	knobs := testknobs.Receipt{SeparateDecide: c.separateDecide}
	return receipt.Open(ctx, st.store, receipt.WithTestKnobs(opts, knobs))
}

// addSummary is the counts of two shards together.
func addSummary(a, b receipt.Summary) receipt.Summary {
	return receipt.Summary{Pending: a.Pending + b.Pending, Started: a.Started + b.Started, Terminal: a.Terminal + b.Terminal,
		Debt: a.Debt + b.Debt, Unreadable: a.Unreadable + b.Unreadable, SessionsOpen: a.SessionsOpen + b.SessionsOpen, Partial: a.Partial || b.Partial}
}

// collectors are every shard's store metrics (labelled by shard when
// there are several).
func (d *daemon) collectors() []prometheus.Collector {
	var out []prometheus.Collector
	for _, st := range d.stores {
		out = append(out, st.collectors...)
	}
	return out
}

// health is /healthz's check: every shard's store answers (nil: no check,
// as for a store without one).
func (d *daemon) health() func() error {
	var checks []func() error
	for _, st := range d.stores {
		if st.health != nil {
			checks = append(checks, st.health)
		}
	}
	if len(checks) == 0 {
		return nil
	}
	return func() error {
		for _, check := range checks {
			if err := check(); err != nil {
				return err
			}
		}
		return nil
	}
}

// serveWith builds the listener chain and the HTTP server. The gate counts
// raw connections, beneath TLS; TLS sits inside the handler's listener,
// through which even the answers net/http gives by itself (a malformed
// request, headers beyond MaxHeaderBytes) are problem details, and which
// must see the plain text. net/http then sees no *tls.Conn: it speaks
// HTTP/1.1 only, and the handshake runs under the header timeout's
// deadline.
func (d *daemon) serveWith(limits api.ConnLimits, tc tlsConfigs, stderr io.Writer) {
	c := d.c
	limits.TLS = tc.server != nil
	gate := d.api.NewConnGate(limits)
	ln := gate.Listener(d.ln)
	if tc.server != nil {
		ln = tls.NewListener(ln, tc.server)
	}
	d.ln = d.api.Listener(ln)
	d.srv = &http.Server{
		ConnState:         gate.ConnState,
		Handler:           d.counted(crashOnPanic(d.api, stderr)),
		MaxHeaderBytes:    headerBytesMax,
		ReadHeaderTimeout: c.headerTimeout,
		ReadTimeout:       c.requestTimeout,
		WriteTimeout:      c.requestTimeout + writeTimeoutOverRequest,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}
}

// connLimits resolves the connection caps against the open-files limit
// and logs what is in force.
func connLimits(c config, log *slog.Logger) (api.ConnLimits, error) {
	limit, err := openFilesLimit()
	if err != nil {
		return api.ConnLimits{}, fmt.Errorf("read the open-files limit: %w", err)
	}
	maxConns, maxIdle, err := connectionCaps(c.maxConns, c.maxIdleConns, limit)
	if err != nil {
		return api.ConnLimits{}, err
	}
	log.Info("idemd: connection caps", "max_connections", maxConns, "max_idle_connections", maxIdle, "open_files_limit", limit)
	return api.ConnLimits{Max: maxConns, IdleMax: maxIdle}, nil
}

// close closes what start opened, newest first.
func (d *daemon) close() error {
	for _, svc := range d.svcs {
		svc.Close()
	}
	var err error
	for _, st := range d.stores {
		err = errors.Join(err, st.close())
	}
	if d.ln != nil && d.srv == nil {
		d.ln.Close() // once served, the server owns it
	}
	return err
}

// serve answers requests until ctx is done or SIGTERM/SIGINT, then shuts
// down. SIGHUP reloads the tokens file (reloadTokens).
func (d *daemon) serve(ctx context.Context) error {
	// Catch signals before announcing the address: a supervisor may signal
	// as soon as it reads the line, and the default action would kill the
	// process without a graceful shutdown (or, for SIGHUP, at all).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	d.log.Info("idemd: listening", "addr", d.ln.Addr().String(), "tls", d.c.tlsCert != "", "data", d.c.data, "owner", d.svc.Owner().String())
	served := make(chan error, 1)
	go func() { served <- d.srv.Serve(d.ln) }()
	stopCounting := d.startCounting(ctx)
	for {
		select {
		case err := <-served:
			stopCounting()
			return errors.Join(err, d.close())
		case <-hup:
			d.reloadTokens() // it logs what it did
		case sig := <-sigs:
			d.log.Info("idemd: shutting down", "signal", sig.String())
			stopCounting()
			return d.shutdown()
		case <-ctx.Done():
			d.log.Info("idemd: shutting down", "cause", context.Cause(ctx).Error())
			stopCounting()
			return d.shutdown()
		}
	}
}

// reloadTokens reads the -tokens file again and puts its tokens in force
// at once, whole (SIGHUP): rotating a token needs no restart. A file that
// cannot be used — unreadable, malformed, empty, a short token — leaves
// the tokens in force as they were, and the error log says why.
func (d *daemon) reloadTokens() error {
	if d.c.tokens == "" {
		d.log.Info("auth: SIGHUP ignored: idemd was started without -tokens, so there is no tokens file to reload")
		return nil
	}
	tokens, err := loadTokens(d.c.tokens, d.log)
	if err == nil {
		err = d.api.SetTokens(tokens)
	}
	if err != nil {
		d.log.Error("auth: tokens not reloaded; the previous tokens stay in force", "file", d.c.tokens, "err", err)
		return err
	}
	d.log.Info("auth: bearer tokens reloaded", "file", d.c.tokens, "tokens", len(tokens))
	return nil
}

// shutdown stops accepting, waits up to -shutdown-timeout for the requests
// in flight, and closes. Requests still in flight then are reported and
// make it an error: their clients got no answer.
func (d *daemon) shutdown() error {
	sctx, cancel := context.WithTimeout(context.Background(), d.c.shutdownTimeout)
	defer cancel()
	var missed int64
	if err := d.srv.Shutdown(sctx); err != nil {
		missed = d.inFlight.Load()
		// Cut the connections left, so that their handlers see a closed
		// connection now rather than a closed store later.
		d.srv.Close()
		if missed > 0 {
			d.log.Warn("idemd: requests still in flight at -shutdown-timeout; their receipts stay leased and the next start adopts them",
				"in_flight", missed, "shutdown_timeout", d.c.shutdownTimeout)
		} else {
			d.log.Warn("idemd: connections open at -shutdown-timeout were closed; no request was in flight", "err", err)
		}
	}
	if err := d.close(); err != nil {
		return err
	}
	if missed > 0 {
		return fmt.Errorf("stopped; %d %s missed -shutdown-timeout %v", missed, plural(missed, "request"), d.c.shutdownTimeout)
	}
	d.log.Info("idemd: stopped cleanly")
	return nil
}

func plural(n int64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// counted counts the requests inside h, for shutdown's report.
func (d *daemon) counted(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.inFlight.Add(1)
		defer d.inFlight.Add(-1)
		h.ServeHTTP(w, r)
	})
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

// tombstoneOption is -tombstone-retention as receipt.Options takes it: the
// flag's 0 (off) is the option's negative (its 0 is the default).
func tombstoneOption(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
