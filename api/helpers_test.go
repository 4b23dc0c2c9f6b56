package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/engine/enginemetrics"
	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
)

// config shapes a test node; zero values take test defaults.
type config struct {
	tokens      map[string]string
	admins      []string
	clock       lease.Clock
	executorMax int
	bodyMax     int64
	// sessionsMax, principalSessions, principalInflight: the node-wide
	// limit of open sessions and the per-principal quotas (zero: the
	// defaults).
	sessionsMax, principalSessions, principalInflight int
	// wrap, if set, wraps the store the service runs on (to hold writes).
	wrap func(store.Store) store.Store
	// presumeAbort: recovery aborts begun, undecided transactions.
	presumeAbort bool
	// separateDecide: a new receipt's decision is a second write, so a
	// failpoint between the two can hold or leave the receipt started.
	separateDecide bool
	waitMax        time.Duration
	// retention and tombRetention: receipt.Options.Retention and
	// TombstoneRetention (zero: the defaults).
	retention, tombRetention time.Duration
	// logger, if set, receives the server's and the service's logs.
	logger *slog.Logger
	// backupDir, if set, is where POST /v1/admin/backup writes (idemd's
	// -backup-dir); the embedded store only.
	backupDir string
	// restore, if set, is the service's restore fence.
	restore *receipt.RestoreFence
}

// node is an api.Server over a real engine and receipt service in a
// temporary directory, served by httptest, with a client whose every
// exchange is recorded for the contract check against api/openapi.yaml.
type node struct {
	t   *testing.T
	dir string
	cfg config

	db  *engine.DB      // nil on the reference store
	mem *memstore.Store // the reference store (testsupport.OnReferenceStore), kept across restarts
	svc *receipt.Service
	srv *api.Server
	ts  *httptest.Server
	c   *apitest.Client
}

func newNode(t *testing.T, cfg config) *node {
	t.Helper()
	n := &node{t: t, dir: t.TempDir(), cfg: cfg}
	n.open()
	t.Cleanup(n.close)
	return n
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func (n *node) open() {
	n.t.Helper()
	log := quiet
	if n.cfg.logger != nil {
		log = n.cfg.logger
	}
	var (
		db    *engine.DB
		st    store.Store
		aopts = api.Options{Tokens: n.cfg.tokens, Admins: n.cfg.admins, BodyBytesMax: n.cfg.bodyMax, Logger: log}
	)
	if testsupport.OnReferenceStore() {
		if n.mem == nil {
			n.mem = memstore.New()
		}
		st = n.mem
	} else {
		var err error
		if db, err = engine.Open(n.dir, engine.Options{Logger: log}); err != nil {
			n.t.Fatal(err)
		}
		st = db
		aopts.StoreCollectors, aopts.Health = []prometheus.Collector{enginemetrics.New(db.Stats)}, db.Health
		if dir := n.cfg.backupDir; dir != "" {
			aopts.Backup = func(name string) (engine.BackupManifest, error) { return db.Backup(filepath.Join(dir, name)) }
		}
	}
	if n.cfg.wrap != nil {
		st = n.cfg.wrap(st)
	}
	opts := receipt.Options{MaintainInterval: -1, CleanInterval: -1, ExecutorMax: n.cfg.executorMax, WaitMax: n.cfg.waitMax,
		Clock: n.cfg.clock, Logger: log, PresumeAbort: n.cfg.presumeAbort,
		Retention: n.cfg.retention, TombstoneRetention: n.cfg.tombRetention, Restore: n.cfg.restore,
		SessionsOpenMax: n.cfg.sessionsMax, SessionsPerPrincipalMax: n.cfg.principalSessions, InflightPerPrincipalMax: n.cfg.principalInflight}
	opts = receipt.WithTestKnobs(opts, testknobs.Receipt{SeparateDecide: n.cfg.separateDecide})
	svc, err := receipt.Open(context.Background(), st, opts)
	if err != nil {
		if db != nil {
			db.Close()
		}
		n.t.Fatal(err)
	}
	srv := api.New(svc, aopts)
	ts := httptest.NewUnstartedServer(srv)
	ts.Listener = srv.Listener(ts.Listener) // as idemd serves it
	ts.Start()
	n.db, n.svc, n.srv, n.ts = db, svc, srv, ts
	if n.c == nil {
		n.c = apitest.NewClient(n.t, n.ts.URL)
	} else {
		*n.c = *n.c.WithBase(n.ts.URL)
	}
}

// close stops the server, the service and the engine (a fail-stopped
// engine's Close error is expected and ignored).
func (n *node) close() {
	if n.ts == nil {
		return
	}
	n.ts.Close()
	n.svc.Close()
	if n.db != nil {
		_ = n.db.Close()
	}
	n.ts = nil
}

// restart reopens the same data directory: a new incarnation, as after a
// process restart.
func (n *node) restart() {
	n.t.Helper()
	n.close()
	n.open()
}

func (n *node) createTable(name string) {
	n.t.Helper()
	r := n.c.Do("PUT", "/v1/tables/"+name, nil)
	if r.Status != 201 && r.Status != 200 {
		n.t.Fatalf("create table %s: %d %s", name, r.Status, r.Body)
	}
}

// batch posts a batch; key "" means the fast path.
func (n *node) batch(table, key, body string, headers ...string) *apitest.Response {
	n.t.Helper()
	if key != "" {
		headers = append(headers, "Idempotency-Key", key)
	}
	return n.c.Do("POST", "/v1/tables/"+table+"/batch", body, headers...)
}

// receipt is GET /v1/receipts/{table}/{key}.
func (n *node) receipt(table, key string) *apitest.Response {
	n.t.Helper()
	return n.c.Do("GET", "/v1/receipts/"+table+"/"+url.PathEscape(key), nil)
}

type receiptView struct {
	TransactionID string    `json:"transaction_id"`
	State         string    `json:"state"`
	Created       time.Time `json:"created"`
	Owner         string    `json:"owner"`
	Debt          bool      `json:"debt"`
	Envelope      *struct {
		Status    int             `json:"status"`
		Outcome   string          `json:"outcome"`
		Code      string          `json:"code"`
		Message   string          `json:"message"`
		Retryable bool            `json:"retryable"`
		RetryWith string          `json:"retry_with"`
		Result    json.RawMessage `json:"result"`
	} `json:"envelope"`
}

func (n *node) receiptView(table, key string) receiptView {
	n.t.Helper()
	var v receiptView
	n.receipt(table, key).JSON(n.t, 200, &v)
	return v
}

// noReceipt asserts that (caller, table, key) has no receipt.
func (n *node) noReceipt(table, key string) {
	n.t.Helper()
	p := n.receipt(table, key).Problem(n.t, 404)
	if p.Code != "receipt_not_found" {
		n.t.Fatalf("receipt lookup: code %q, want receipt_not_found", p.Code)
	}
}

// doc reads a document's JSON object.
func (n *node) doc(table, id string) map[string]any {
	n.t.Helper()
	var d struct {
		ID  string         `json:"id"`
		Doc map[string]any `json:"doc"`
	}
	n.c.Do("GET", "/v1/tables/"+table+"/docs/"+id, nil).JSON(n.t, 200, &d)
	if d.ID != id {
		n.t.Fatalf("doc id %q, want %q", d.ID, id)
	}
	return d.Doc
}

// waitState polls the receipt of key until it is in state, or fails the
// test at the deadline.
func (n *node) waitState(table, key, state string) receiptView {
	n.t.Helper()
	var v receiptView
	var last *apitest.Response
	if !testsupport.Eventually(testsupport.Patience, func() bool {
		r, err := n.c.Try("GET", "/v1/receipts/"+table+"/"+url.PathEscape(key), nil)
		if err != nil {
			n.t.Fatal(err)
		}
		last = r
		if r.Status != 200 {
			return false
		}
		var got receiptView
		if err := json.Unmarshal(r.Body, &got); err != nil {
			n.t.Fatal(err)
		}
		v = got
		return v.State == state
	}) {
		n.t.Fatalf("receipt %s/%s never reached state %s (last: %d %s)", table, key, state, last.Status, last.Body)
	}
	return v
}

// result decodes a committed batch answer.
type result struct {
	Inserted    int `json:"inserted"`
	Deleted     int `json:"deleted"`
	Transformed int `json:"transformed"`
}

// checkProblem asserts the members every problem of code c has; retryWith
// is the code's, which a keyed answer must state and an unkeyed one must
// leave out.
func checkProblem(t *testing.T, p apitest.Problem, c string, status int, retryable bool, retryWith string) {
	t.Helper()
	if !p.Keyed {
		retryWith = ""
	}
	if p.Code != c || p.Status != status || p.Retryable != retryable || p.RetryWith != retryWith {
		t.Fatalf("problem %+v, want code=%s status=%d retryable=%v retry_with=%q", p, c, status, retryable, retryWith)
	}
	if p.Type != "urn:idem:problem:"+c || p.Title == "" || p.Detail == "" {
		t.Fatalf("problem %+v: type, title or detail missing", p)
	}
	for _, m := range []string{"type", "title", "status", "detail", "code", "retryable"} {
		if !p.Members[m] {
			t.Fatalf("problem lacks member %q: %+v", m, p)
		}
	}
}

// checkKeyed asserts the keyed-route members: outcome and transaction_id.
func checkKeyed(t *testing.T, r *apitest.Response, p apitest.Problem, outcome string) {
	t.Helper()
	if p.Outcome != outcome || !p.Members["outcome"] {
		t.Fatalf("outcome %q, want %q (%+v)", p.Outcome, outcome, p)
	}
	if len(p.TransactionID) != 32 || !p.Members["transaction_id"] {
		t.Fatalf("transaction_id %q (%+v)", p.TransactionID, p)
	}
	if h := r.Header.Get("Idem-Transaction-Id"); h != p.TransactionID {
		t.Fatalf("Idem-Transaction-Id %q, transaction_id %q", h, p.TransactionID)
	}
}

// checkUnbound asserts a problem carries no transaction members.
func checkUnbound(t *testing.T, r *apitest.Response, p apitest.Problem) {
	t.Helper()
	if p.Members["outcome"] || p.Members["transaction_id"] || r.Header.Get("Idem-Transaction-Id") != "" {
		t.Fatalf("problem bound to a transaction: %s %v", r.Body, r.Header)
	}
}

func hasHeader(r *apitest.Response, name string) bool { _, ok := r.Header[name]; return ok }

func contains(s, sub string) bool { return strings.Contains(s, sub) }
