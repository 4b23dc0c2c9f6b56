package api

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/receipt"
)

// Options configure a Server. Zero fields take defaults.
type Options struct {
	// Tokens maps bearer tokens to principals; nil means a single Anonymous
	// principal. Server.SetTokens replaces them while serving.
	Tokens map[string]string
	// BodyBytesMax caps a request body (default 1 MiB); larger → 413.
	BodyBytesMax int64
	// RequestTimeout bounds the work of one request (default 60s; a keyed
	// request's Prefer wait is bounded separately by the service).
	RequestTimeout time.Duration
	// BodyTimeout bounds reading a request's body (default 10s); a body
	// still arriving then is answered 408 request_timeout and its
	// connection closed, so a slow sender holds a connection that long at
	// most, not the whole RequestTimeout.
	BodyTimeout time.Duration
	// StoreCollectors are the store's own metrics, registered beside the
	// API's (for engine.DB: enginemetrics.New(db.Stats)).
	StoreCollectors []prometheus.Collector
	// Health, if set, is checked by /healthz: an error answers 503
	// unavailable (e.g. the engine fail-stopped and needs a restart).
	Health func() error
	// Admins are the principals that may act as operators: list every
	// principal's receipts and resolve a stuck one (admin.go). On a server
	// without tokens the single principal is one.
	Admins []string
	// Forward, if set with a secret, sends a keyed request whose receipt
	// another live node holds to that node, and accepts requests other
	// nodes forward (forward.go); nil answers it here and serves every
	// request as a client's.
	Forward *Forwarding
	// Backup, if set, takes a backup of the store under idemd's
	// -backup-dir (backup.go); nil answers POST /v1/admin/backup 501.
	Backup BackupFunc
	Logger *slog.Logger
}

const (
	defaultBodyBytesMax   = 1 << 20
	defaultRequestTimeout = 60 * time.Second
	// defaultBodyTimeout lets a client at 100 KiB/s send a default-sized
	// (1 MiB) body.
	defaultBodyTimeout = 10 * time.Second
)

// Server serves the API for one receipt service, or for the services of
// a deployment's store shards (NewSharded). It is a facade: the handlers
// of the routes are its methods, and what they share is held by the
// components below, each owning its state.
type Server struct {
	// svc is shards[0]: what every shard has alike (its bounds, -wait-max,
	// -session-ttl-max) is read from it.
	svc *receipt.Service
	// shardMap sends each request to its store shard's service
	// (shardroute.go, shardfanout.go).
	shardMap *shardMap
	opts     *Options
	auth     *authenticator // auth.go
	failures *failures      // failures.go, unavailable.go
	router   *router        // router.go
	handler  http.Handler   // router.dispatch
	metrics  *metrics
	// The routes' handlers, by group; what they share (body.go,
	// forward.go's peers) they hold themselves.
	batches  *batchRoute    // batch.go
	sessions *sessionRoutes // sessions.go
	tables   *tableRoutes   // tables.go
	admin    *adminRoutes   // admin.go, backup.go
}

// New builds the server and its routes, on one receipt service.
func New(svc *receipt.Service, opts Options) *Server {
	return NewSharded([]*receipt.Service{svc}, opts)
}

// NewSharded builds the server on the services of every store shard, in
// the shard map's order (1..StoreShardsMax of them): each request goes to
// its shard's (shardroute.go).
func NewSharded(shards []*receipt.Service, opts Options) *Server {
	if len(shards) < 1 || len(shards) > StoreShardsMax {
		panic(fmt.Sprintf("api: %d store shards, not 1..%d", len(shards), StoreShardsMax))
	}
	if opts.BodyBytesMax <= 0 {
		opts.BodyBytesMax = defaultBodyBytesMax
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = defaultRequestTimeout
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = defaultBodyTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := newServer(slices.Clone(shards), &opts)
	auth := func(h http.HandlerFunc) http.Handler { return s.auth.authenticate(h) }
	s.router.route("PUT /v1/tables/{table}", auth(s.tables.putTable))
	s.router.route("DELETE /v1/tables/{table}", auth(s.tables.deleteTable))
	s.router.route("GET /v1/tables", auth(s.tables.listTables))
	s.router.route("POST /v1/tables/{table}/batch", auth(s.batches.batch))
	s.router.route("GET /v1/tables/{table}/docs/{id}", auth(s.tables.getDoc))
	s.router.route("GET /v1/receipts/{table}/{key...}", auth(s.tables.getReceipt))
	s.router.route("GET /v1/receipts", auth(s.admin.listReceipts))
	s.router.route("POST /v1/admin/receipts/{txn_id}/resolve", auth(s.admin.resolveReceipt))
	s.router.route("POST /v1/admin/backup", auth(s.admin.backup))
	s.router.route("POST /v1/sessions", auth(s.sessions.beginSession))
	s.router.route("GET /v1/sessions/{id}", auth(s.sessions.getSession))
	s.router.route("GET /v1/sessions/{id}/receipt", auth(s.tables.getSessionReceipt))
	s.router.route("DELETE /v1/sessions/{id}", auth(s.sessions.abortSession))
	s.router.route("POST /v1/sessions/{id}/batch", auth(s.sessions.stageSession))
	s.router.route("GET /v1/sessions/{id}/tables/{table}/docs/{doc}", auth(s.sessions.readSessionDoc))
	s.router.route("POST /v1/sessions/{id}/commit", auth(s.sessions.commitSession))
	s.router.route("GET /healthz", http.HandlerFunc(s.healthz))
	s.router.route("GET /metrics", s.metrics.handler())
	s.router.unmatched = s.metrics.instrument(unmatchedRoute, http.HandlerFunc(s.router.noRoute))
	s.handler = http.HandlerFunc(s.router.dispatch)
	return s
}

// newServer builds the server's components on shards and opts (its
// defaults set); the routes are NewSharded's.
func newServer(shards []*receipt.Service, opts *Options) *Server {
	fwd := newForwarder(opts.Forward)
	if opts.Forward != nil && fwd == nil {
		opts.Logger.Warn("api: forwarding is off: its cluster secret is shorter than " + strconv.Itoa(ClusterSecretBytesMin) + " bytes")
	}
	auth := &authenticator{opts: opts}
	if opts.Tokens != nil {
		set := tokenSet(maps.Clone(opts.Tokens))
		auth.tokens.Store(&set)
	}
	failures := &failures{opts: opts}
	m := newMetrics(shards, opts.StoreCollectors, opts.Health)
	m.reg.MustRegister(failures.refusalCollectors()...)
	peers := &peers{forwarder: fwd, opts: opts, metrics: m, shards: shards}
	sm, bs := &shardMap{svc: shards[0], shards: shards}, &bodies{opts: opts}
	return &Server{
		svc: shards[0], shardMap: sm, opts: opts,
		auth: auth, failures: failures,
		router:   &router{mux: http.NewServeMux(), metrics: m, peers: peers, opts: opts},
		metrics:  m,
		batches:  &batchRoute{svc: shards[0], shardMap: sm, bodies: bs, failures: failures, peers: peers, metrics: m},
		sessions: &sessionRoutes{svc: shards[0], shardMap: sm, bodies: bs, failures: failures, peers: peers, metrics: m},
		tables:   &tableRoutes{shardMap: sm, bodies: bs, failures: failures},
		admin:    &adminRoutes{opts: opts, auth: auth, shardMap: sm, bodies: bs, failures: failures, metrics: m},
	}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if s.opts.Health != nil {
		if err := s.opts.Health(); err != nil {
			s.failures.noteUnhealthy(err)
			writeProblem(w, code.Unavailable, healthDetail(err))
			return
		}
	}
	h := healthJSON{Status: "ok", Owner: s.svc.Owner().String()}
	if f, until, ok := s.svc.Restored(); ok {
		h.Restored = &restoredJSON{RestoredAt: f.RestoredAt.UTC(), BackupTime: f.BackupTime.UTC(), FenceUntil: until.UTC()}
	}
	if len(s.shardMap.shards) > 1 {
		for _, svc := range s.shardMap.shards {
			sh := shardHealthJSON{Owner: svc.Owner().String()}
			if f, until, ok := svc.Restored(); ok {
				sh.Restored = &restoredJSON{RestoredAt: f.RestoredAt.UTC(), BackupTime: f.BackupTime.UTC(), FenceUntil: until.UTC()}
			}
			h.Shards = append(h.Shards, sh)
		}
	}
	writeJSON(w, http.StatusOK, h)
}

// healthJSON is /healthz's answer. Owner and Restored are shard 0's;
// Shards, on a sharded deployment only, says each shard's.
type healthJSON struct {
	Status   string            `json:"status"`
	Owner    string            `json:"owner"`
	Restored *restoredJSON     `json:"restored,omitempty"`
	Shards   []shardHealthJSON `json:"shards,omitempty"`
}

// shardHealthJSON is one store shard's part of /healthz: this node's
// incarnation there, and its restore fence.
type shardHealthJSON struct {
	Owner    string        `json:"owner"`
	Restored *restoredJSON `json:"restored,omitempty"`
}

// restoredJSON says the store was restored from a backup, and how long its
// restore fence lasts.
type restoredJSON struct {
	RestoredAt time.Time `json:"restored_at"`
	BackupTime time.Time `json:"backup_time"`
	FenceUntil time.Time `json:"fence_until"`
}
