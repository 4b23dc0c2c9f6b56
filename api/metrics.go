package api

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/receipt"
)

// metrics is the server's Prometheus registry. Counters the service and
// engine already keep are exported as CounterFuncs, read at scrape time, so
// the hot path pays nothing for them.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	outcomes *prometheus.CounterVec
}

func newMetrics(svc *receipt.Service, engineStats func() engine.Stats) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_http_requests_total", Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "code"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_keyed_answers_total", Help: "Keyed batch answers by outcome (committed, aborted, not_applied, pending) and whether replayed.",
		}, []string{"outcome", "replayed"}),
	}
	m.reg.MustRegister(m.requests, m.outcomes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	counter := func(name, help string, f func(receipt.Stats) uint64) {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(f(svc.Stats())) }))
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
	sup := func(name, help string, f func(s supStats) uint64) {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(f(supStats(svc.Supervisor().Stats()))) }))
	}
	sup("idem_renewal_batches_total", "Renewal supervisor batches (passes over the active set).", func(s supStats) uint64 { return s.Passes })
	sup("idem_renewal_writes_total", "Renewal Applies attempted.", func(s supStats) uint64 { return s.Writes })
	sup("idem_leases_renewed_total", "Leases renewed.", func(s supStats) uint64 { return s.Renewed })
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "idem_executor_busy", Help: "Executor slots in use (keyed executions running).",
	}, func() float64 { return float64(svc.Stats().ExecutorBusy) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "idem_active_leases", Help: "Receipts in the renewal active set.",
	}, func() float64 { return float64(svc.Active().Len()) }))
	if engineStats != nil {
		wal := func(name, help string, f func(engine.Stats) uint64) {
			m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
				func() float64 { return float64(f(engineStats())) }))
		}
		wal("idem_wal_fsyncs_total", "fsync calls of the WAL (segments and directory).", func(s engine.Stats) uint64 { return s.WAL.Fsyncs })
		wal("idem_wal_groups_total", "WAL group commits.", func(s engine.Stats) uint64 { return s.WAL.Groups })
		wal("idem_wal_entries_total", "WAL entries (engine batches); entries/groups is the mean group size.", func(s engine.Stats) uint64 { return s.WAL.Entries })
		wal("idem_wal_bytes_total", "WAL frame bytes written.", func(s engine.Stats) uint64 { return s.WAL.Bytes })
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "idem_wal_group_size_mean", Help: "Mean entries per WAL group commit since start.",
		}, func() float64 {
			st := engineStats()
			if st.WAL.Groups == 0 {
				return 0
			}
			return float64(st.WAL.Entries) / float64(st.WAL.Groups)
		}))
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "idem_engine_keys", Help: "Keys in the store.",
		}, func() float64 { return float64(engineStats().Keys) }))
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "idem_engine_log_since_checkpoint_entries", Help: "Log positions after the newest checkpoint: about what a restart now would replay.",
		}, func() float64 { st := engineStats(); return float64(st.Applied - min(st.Checkpoint, st.Applied)) }))
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "idem_engine_recovery_replayed_bytes", Help: "Log bytes the open that started this process replayed after its checkpoint.",
		}, func() float64 { return float64(engineStats().Recovery.ReplayedBytes) }))
	}
	return m
}

type supStats struct{ Passes, Renewed, Fenced, Writes uint64 }

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// instrument counts requests of one route by status code.
func (m *metrics) instrument(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		m.count(route, sw.status)
	})
}

func (m *metrics) count(route string, status int) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
}

func (m *metrics) keyed(a receipt.Answer) {
	outcome := a.Outcome
	if outcome == "" {
		outcome = "rejected"
	}
	m.outcomes.WithLabelValues(outcome, strconv.FormatBool(a.Replayed)).Inc()
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}
