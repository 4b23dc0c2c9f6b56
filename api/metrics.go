package api

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
)

// metrics is the server's Prometheus registry. Counters the service
// already keeps are read at scrape time (CounterFuncs), so the hot path
// pays nothing for them; the store's own metrics come from the collectors
// its owner passes in (Options.StoreCollectors), so that no stats type of
// one store shows through the API.
type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
	outcomes  *prometheus.CounterVec
	// keyedSeries are outcomes' series by keyedOutcomes' index and
	// replayed (0 false, 1 true), resolved once (outcomeSeries).
	keyedSeries [][2]prometheus.Counter
	// resolutions counts operators' resolutions by what they did.
	resolutions *prometheus.CounterVec
	// forwardRefusals counts what forwarding between nodes refused.
	forwardRefusals *prometheus.CounterVec
}

// What label values of idem_forward_refused_total.
const (
	// refusedRequest: a request's internal headers, not signed by a node,
	// were dropped (forwardauth.go).
	refusedRequest = "request"
	// refusedAnswer: what the owner's address answered was no answer of
	// the owner's, and was not relayed (forward.go).
	refusedAnswer = "answer"
)

// forwardRefused counts one refusal of what (refusedRequest or
// refusedAnswer).
func (m *metrics) forwardRefused(what string) { m.forwardRefusals.WithLabelValues(what).Inc() }

// Result label values of idem_admin_resolutions_total.
var resolutionResults = []string{"presumed_abort", "decision_in_force", "already_terminal"}

// resolution counts one operator's resolution.
func (m *metrics) resolution(r receipt.Resolution) {
	result := "decision_in_force"
	switch {
	case r.WasTerminal:
		result = "already_terminal"
	case r.Decided:
		result = "presumed_abort"
	}
	m.resolutions.WithLabelValues(result).Inc()
}

// routePatterns are the patterns server.go registers; a test holds the two
// lists equal. With unmatchedRoute and malformedRoute they are the route
// label's values, which the request metrics' HELP lists.
var routePatterns = []string{
	"PUT /v1/tables/{table}",
	"DELETE /v1/tables/{table}",
	"GET /v1/tables",
	"POST /v1/tables/{table}/batch",
	"GET /v1/tables/{table}/docs/{id}",
	"GET /v1/receipts/{table}/{key...}",
	"GET /v1/receipts",
	"POST /v1/admin/receipts/{txn_id}/resolve",
	"POST /v1/admin/backup",
	"POST /v1/sessions",
	"GET /v1/sessions/{id}",
	"GET /v1/sessions/{id}/receipt",
	"DELETE /v1/sessions/{id}",
	"POST /v1/sessions/{id}/batch",
	"GET /v1/sessions/{id}/tables/{table}/docs/{doc}",
	"POST /v1/sessions/{id}/commit",
	"GET /healthz",
	"GET /metrics",
}

// successStatuses are the statuses of the answers that are not problems;
// with every problem code's status (code.Lookup) they are the code label's
// values.
var successStatuses = []int{http.StatusOK, http.StatusCreated, http.StatusNoContent}

// requestDurationBuckets are the bounds, in seconds, of
// idem_http_request_duration_seconds: from 0.5 ms, a read served from
// memory, through the milliseconds of an fsynced write, to 60 s, the
// default RequestTimeout that bounds a request's work (a longer configured
// timeout's stragglers land in +Inf). Steps of about 2–2.5×.
var requestDurationBuckets = []float64{
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 30, defaultRequestTimeout.Seconds(),
}

// Outcome label values of idem_keyed_answers_total besides an envelope's
// own outcome.
const (
	// outcomeMismatch: 422 idempotency_key_mismatch, the key reused with a
	// different request. Its envelope says not_applied; counted apart, a
	// client bug does not hide among the batches refused on their merits.
	outcomeMismatch = "mismatch"
	// outcomeExpired: 409 idempotency_key_expired, the key reused after
	// its receipt's retention, refused by its tombstone.
	outcomeExpired = "expired"
	// outcomeRejected: an answer without an outcome (refused before a
	// receipt existed).
	outcomeRejected = "rejected"
)

// keyedOutcomes are the outcome label's values.
var keyedOutcomes = []string{
	receipt.OutcomeCommitted, receipt.OutcomeAborted, receipt.OutcomeNotApplied, receipt.OutcomePending,
	outcomeMismatch, outcomeExpired, outcomeRejected,
}

// requestLabelsHelp lists the values of the request metrics' labels.
func requestLabelsHelp() string {
	routes := append(slices.Clone(routePatterns), unmatchedRoute, malformedRoute)
	statuses := slices.Clone(successStatuses)
	for _, c := range code.All() {
		statuses = append(statuses, code.Lookup(c).Status)
	}
	slices.Sort(statuses)
	codes := make([]string, 0, len(statuses))
	for _, st := range slices.Compact(statuses) {
		codes = append(codes, strconv.Itoa(st))
	}
	return ` route: the pattern served, "` + strings.Join(routes, `", "`) +
		`" ("` + unmatchedRoute + `": no route, answered 404 or 405; "` + malformedRoute +
		`": net/http could not parse the request). code: the status the client got, ` +
		strings.Join(codes, ", ") + "."
}

// newMetrics is the registry of a server on svcs, its store shards' services:
// each service series is the sum over them (the oldest lease age, their
// maximum), so a node reports one series per family however many shards it
// serves.
func newMetrics(svcs []*receipt.Service, storeCollectors []prometheus.Collector, health func() error) *metrics {
	m := newRequestMetrics()
	m.registerServiceCounters(svcs)
	m.registerLeaseGauges(svcs)
	m.reg.MustRegister(storeCollectors...)
	if health != nil {
		m.registerHealth(health)
	}
	return m
}

// newRequestMetrics is the registry with the request, keyed-answer,
// resolution and forwarding families, and the Go and process collectors.
func newRequestMetrics() *metrics {
	labels := requestLabelsHelp()
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_http_requests_total", Help: "HTTP requests by route pattern and status code." + labels,
		}, []string{"route", "code"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "idem_http_request_duration_seconds", Help: "HTTP request latency, from routing to the handler's return, by route pattern and status code." + labels,
			Buckets: requestDurationBuckets,
		}, []string{"route", "code"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_keyed_answers_total", Help: "Keyed batch answers by outcome and whether replayed. " +
				"outcome: committed, aborted, not_applied, pending (the envelope's outcome), " +
				"mismatch (422 idempotency_key_mismatch), expired (409 idempotency_key_expired), rejected (refused without an outcome). replayed: true, false.",
		}, []string{"outcome", "replayed"}),
	}
	m.resolutions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "idem_admin_resolutions_total", Help: "Operators' resolutions of started receipts (POST /v1/admin/receipts/{txn_id}/resolve) by result: " +
			"presumed_abort (the operator's abort decided it), decision_in_force (a decision existed and was published), already_terminal (nothing written).",
	}, []string{"result"})
	for _, r := range resolutionResults {
		m.resolutions.WithLabelValues(r)
	}
	m.forwardRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "idem_forward_refused_total", Help: "What forwarding between nodes refused, by what: " +
			"request (internal headers no node signed, dropped: the request was served as a client's), " +
			"answer (what the owner's address answered was not the owner's signed answer: not relayed, the request was answered here).",
	}, []string{"what"})
	m.forwardRefusals.WithLabelValues(refusedRequest)
	m.forwardRefusals.WithLabelValues(refusedAnswer)
	// Every keyed series exists from the start, so that rates over them do
	// not begin with a gap.
	m.keyedSeries = make([][2]prometheus.Counter, len(keyedOutcomes))
	for i, o := range keyedOutcomes {
		m.keyedSeries[i] = [2]prometheus.Counter{m.outcomes.WithLabelValues(o, "false"), m.outcomes.WithLabelValues(o, "true")}
	}
	m.reg.MustRegister(m.requests, m.durations, m.outcomes, m.resolutions, m.forwardRefusals,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// registerServiceCounters adds the service's own counters, read at scrape
// time (the hot path pays nothing for them).
func (m *metrics) registerServiceCounters(svcs []*receipt.Service) {
	counter := func(name, help string, f func(receipt.Stats) uint64) {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 {
				return sumOver(svcs, func(svc *receipt.Service) float64 { return float64(f(svc.Stats())) })
			}))
	}
	counter("idem_replays_total", "Stored envelopes returned to retries.", func(s receipt.Stats) uint64 { return s.Replayed })
	counter("idem_key_mismatches_total", "Idempotency-Key reused with a different request (422).", func(s receipt.Stats) uint64 { return s.Mismatches })
	counter("idem_in_progress_total", "Answers idempotency_request_in_progress (409).", func(s receipt.Stats) uint64 { return s.InProgress })
	counter("idem_pending_total", "Answers idempotency_receipt_pending (503).", func(s receipt.Stats) uint64 { return s.PendingAnswers })
	counter("idem_overloaded_total", "Answers overloaded (429): receipt left pending.", func(s receipt.Stats) uint64 { return s.Overloaded })
	counter("idem_executions_total", "Receipts executed through 2PC by this process.", func(s receipt.Stats) uint64 { return s.Executed })
	counter("idem_adoptions_total", "Receipts adopted from another owner or incarnation.", func(s receipt.Stats) uint64 { return s.Adopted })
	counter("idem_fence_rejections_total", "Writes rejected because another owner holds the receipt.", func(s receipt.Stats) uint64 { return s.Fenced })
	counter("idem_recovery_passes_total", "Recovery maintenance passes.", func(s receipt.Stats) uint64 { return s.RecoveryPasses })
	counter("idem_recovered_total", "Receipts made terminal by recovery maintenance.", func(s receipt.Stats) uint64 { return s.Recovered })
	counter("idem_decisions_released_total", "Retained 2PC decisions released.", func(s receipt.Stats) uint64 { return s.Released })
	counter("idem_cleaner_deletions_total", "Receipts deleted by the retention cleaner.", func(s receipt.Stats) uint64 { return s.Cleaned })
	counter("idem_tombstones_written_total", "Tombstones the cleaner left of the receipts it deleted (the key stays refused until its protection ends).", func(s receipt.Stats) uint64 { return s.Tombstoned })
	counter("idem_tombstones_cleaned_total", "Tombstones deleted once their key's protection ended.", func(s receipt.Stats) uint64 { return s.TombsCleaned })
	counter("idem_expiry_entries_folded_total", "Retention entries folded into chunks, one key per chunk instead of one per receipt.", func(s receipt.Stats) uint64 { return s.Folded })
	counter("idem_contended_replans_total", "Keyed Begins tried again after meeting another node's transaction on a document (contention waited out on a shared store, not refused).", func(s receipt.Stats) uint64 { return s.Replans })
	counter("idem_visibility_debt_paid_total", "Decided transactions whose leftover intents a keyed Begin met on its documents and resolved itself, instead of refusing the batch.", func(s receipt.Stats) uint64 { return s.DebtPaid })
	counter("idem_stale_table_replans_total", "Keyed creates planned from cached table metadata that had changed: planned again from a fresh read, the refusal never stored.", func(s receipt.Stats) uint64 { return s.Replanned })
	counter("idem_contended_pending_total", "Keyed batches whose documents another transaction still held after the waits allowed: answered 503 idempotency_receipt_pending, nothing stored, retried with the same key (never a stored transaction_conflict).", func(s receipt.Stats) uint64 { return s.ContendedPending })
	counter("idem_key_expired_total", "Requests refused with 409 idempotency_key_expired: a key reused after its receipt's retention.", func(s receipt.Stats) uint64 { return s.Expired })
	counter("idem_sessions_begun_total", "Interactive sessions begun here.", func(s receipt.Stats) uint64 { return s.SessionsBegun })
	counter("idem_sessions_committed_total", "Session commits published (each one a receipt).", func(s receipt.Stats) uint64 { return s.SessionsCommitted })
	counter("idem_sessions_aborted_total", "Sessions ended without a commit: aborted, expired, or presumed aborted after their owner's death.", func(s receipt.Stats) uint64 { return s.SessionsAborted })
	counter("idem_sessions_expired_total", "Sessions ended by expiry or presumed abort (of idem_sessions_aborted_total).", func(s receipt.Stats) uint64 { return s.SessionsExpired })
	// By kind only: a principal label would grow a series per tenant.
	for _, r := range receipt.Refusals {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "idem_refused_total", ConstLabels: prometheus.Labels{"kind": r.String()},
			Help: refusedHelp,
		}, func() float64 {
			return sumOver(svcs, func(svc *receipt.Service) float64 { return float64(svc.Stats().Refused[r]) })
		}))
	}
	sup := func(name, help string, f func(s supStats) uint64) {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 {
				return sumOver(svcs, func(svc *receipt.Service) float64 { return float64(f(supStats(svc.Supervisor().Stats()))) })
			}))
	}
	sup("idem_renewal_batches_total", "Renewal supervisor batches (passes over the active set).", func(s supStats) uint64 { return s.Passes })
	sup("idem_renewal_writes_total", "Renewal Applies attempted.", func(s supStats) uint64 { return s.Writes })
	sup("idem_leases_renewed_total", "Leases renewed.", func(s supStats) uint64 { return s.Renewed })
}

// registerLeaseGauges adds the executor's and the active set's gauges.
func (m *metrics) registerLeaseGauges(svcs []*receipt.Service) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "idem_executor_busy", Help: "Executor slots in use (keyed executions running).",
	}, func() float64 {
		return sumOver(svcs, func(svc *receipt.Service) float64 { return float64(svc.Stats().ExecutorBusy) })
	}))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "idem_active_leases", Help: "Leases in the renewal active set: mutable receipts, terminal ones with debt, open sessions.",
	}, func() float64 {
		return sumOver(svcs, func(svc *receipt.Service) float64 { return float64(svc.Active().Len()) })
	}))
	// The executor and the active set are shared by receipts and sessions
	// (docs/design.md §14): their split by kind is what shows one kind crowding the
	// other out.
	m.reg.MustRegister(kindGauge("idem_executor_busy_by_kind",
		"Executor slots in use by kind. kind: receipt (keyed batches and session commits), session (steps of open sessions).",
		func(k lease.Kind) float64 {
			return sumOver(svcs, func(svc *receipt.Service) float64 {
				st := svc.Stats()
				if k == lease.KindSession {
					return float64(st.ExecutorBusySessions)
				}
				return float64(st.ExecutorBusyReceipts)
			})
		}))
	m.reg.MustRegister(kindGauge("idem_active_leases_by_kind",
		"Leases in the renewal active set by kind. kind: receipt, session.",
		func(k lease.Kind) float64 {
			return sumOver(svcs, func(svc *receipt.Service) float64 { return float64(svc.Active().LenOf(k)) })
		}))
	// The age of the oldest work this node holds mutable: what "pending
	// receipts older than N lease periods" alerts on (ops/idem.rules.yml),
	// read from the active set, never from the store.
	m.reg.MustRegister(kindGauge("idem_oldest_lease_age_seconds",
		"Age of the oldest lease this node holds by kind (since the receipt or session was created; 0: none). "+
			"kind: receipt (pending, started, or terminal with debt unpaid), session (open).",
		func(k lease.Kind) float64 {
			oldest := 0.0
			for _, svc := range svcs {
				if t := svc.Active().OldestOf(k); !t.IsZero() {
					oldest = max(oldest, time.Since(t).Seconds())
				}
			}
			return oldest
		}))
}

// sumOver is f summed over the store shards' services.
func sumOver(svcs []*receipt.Service, f func(*receipt.Service) float64) float64 {
	total := 0.0
	for _, svc := range svcs {
		total += f(svc)
	}
	return total
}

// registerHealth adds idem_healthy.
func (m *metrics) registerHealth(health func() error) {
	// What /healthz answers, as a series: /metrics answers even when
	// the store does not (an etcd out of reach), so "up" alone would
	// say nothing of it. Each scrape runs the probe (bounded: for etcd
	// one read within a second).
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "idem_healthy", Help: "1 when /healthz answers 200 (the store answers and has not fail-stopped), 0 when it answers 503.",
	}, func() float64 {
		if health() != nil {
			return 0
		}
		return 1
	}))

}

// refusedHelp is idem_refused_total's help, the same for every kind
// (Prometheus requires one help per family).
const refusedHelp = "Requests refused overloaded, by the limit hit. kind: principal_sessions (429: the principal's open sessions at -principal-sessions-max), " +
	"node_sessions (429: the node's at -sessions-max), principal_inflight (429: the principal's requests in flight at -principal-inflight-max), " +
	"executor (429: no executor slot came free in time), connections (503: a connection past -max-connections, answered and closed)."

// refusedConnections is idem_refused_total's kind for connection refusals.
const refusedConnections = "connections"

// kindGauge is a gauge with one series per lease.Kind.
func kindGauge(name, help string, f func(lease.Kind) float64) prometheus.Collector {
	return &kindCollector{desc: prometheus.NewDesc(name, help, []string{"kind"}, nil), f: f}
}

type kindCollector struct {
	desc *prometheus.Desc
	f    func(lease.Kind) float64
}

func (c *kindCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *kindCollector) Collect(ch chan<- prometheus.Metric) {
	for _, k := range lease.Kinds {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, c.f(k), k.String())
	}
}

type supStats struct{ Passes, Renewed, Fenced, Writes uint64 }

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// instrument records every request h answers in the request metrics,
// under route (a pattern, or unmatchedRoute) and the status the client
// got: the status of WriteHeader, 200 for a body written without one or
// for no answer at all (every handler here writes its header once). The
// duration is h's, from its start to its return.
//
// It is promhttp's InstrumentHandlerCounter and InstrumentHandlerDuration
// in one, without their per-request costs: one status-capturing writer
// instead of two, and each (route, code) pair's series resolved once, not
// looked up by label values on every request (a profile of the HTTP keyed
// path put the two wrappers at 7 % of the handler's CPU).
func (m *metrics) instrument(route string, h http.Handler) http.Handler {
	return &instrumented{h: h, series: routeSeriesOf(m, route)}
}

type instrumented struct {
	h      http.Handler
	series *routeSeries
}

func (in *instrumented) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := statusWriterFor(w, r)
	in.h.ServeHTTP(sw, r)
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	c, d := in.series.of(status)
	c.Inc()
	d.Observe(time.Since(start).Seconds())
}

// routeSeries are one route's request series, by status code, resolved
// on first use.
type routeSeries struct {
	m      *metrics
	route  string
	byCode sync.Map // int → *codeSeries
}

type codeSeries struct {
	count prometheus.Counter
	dur   prometheus.Observer
}

func routeSeriesOf(m *metrics, route string) *routeSeries { return &routeSeries{m: m, route: route} }

func (rs *routeSeries) of(status int) (prometheus.Counter, prometheus.Observer) {
	if v, ok := rs.byCode.Load(status); ok {
		cs := v.(*codeSeries)
		return cs.count, cs.dur
	}
	sc := strconv.Itoa(status)
	cs := &codeSeries{count: rs.m.requests.WithLabelValues(rs.route, sc), dur: rs.m.durations.WithLabelValues(rs.route, sc)}
	v, _ := rs.byCode.LoadOrStore(status, cs)
	cs = v.(*codeSeries)
	return cs.count, cs.dur
}

// statusWriter remembers the status a handler wrote. Unwrap lets
// http.ResponseController reach the connection's writer (flushing,
// deadlines) through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// observe records one answer no handler wrote, so that instrument never
// saw it: net/http's own answer to a request it could not parse
// (malformedRoute, connerr.go), rewritten on the connection.
func (m *metrics) observe(route string, status int, elapsed time.Duration) {
	sc := strconv.Itoa(status)
	m.requests.WithLabelValues(route, sc).Inc()
	m.durations.WithLabelValues(route, sc).Observe(elapsed.Seconds())
}

// keyed counts one keyed answer by outcome (see keyedOutcomes).
func (m *metrics) keyed(a receipt.Answer) {
	outcome := a.Outcome
	switch {
	case a.Code == code.KeyMismatch:
		outcome = outcomeMismatch
	case a.Code == code.KeyExpired:
		outcome = outcomeExpired
	case outcome == "":
		outcome = outcomeRejected
	}
	m.outcomeSeries(outcome, a.Replayed).Inc()
}

// outcomeSeries is the idem_keyed_answers_total series of (outcome,
// replayed): one of those resolved at start for a known outcome, without
// the label lookup WithLabelValues does on each call.
func (m *metrics) outcomeSeries(outcome string, replayed bool) prometheus.Counter {
	r := 0
	if replayed {
		r = 1
	}
	if i := slices.Index(keyedOutcomes, outcome); i >= 0 {
		return m.keyedSeries[i][r]
	}
	return m.outcomes.WithLabelValues(outcome, strconv.FormatBool(replayed))
}
