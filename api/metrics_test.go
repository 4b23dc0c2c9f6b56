package api

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/engine/enginemetrics"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/receipt"
)

// operatorMetrics are the idem_* metric families operators' dashboards and
// alerts depend on, with their types. /metrics must expose exactly these:
// renaming, dropping or retyping one breaks someone, so it must be done
// here, on purpose (and in the README's list).
var operatorMetrics = map[string]dto.MetricType{
	"idem_http_requests_total":                 dto.MetricType_COUNTER,
	"idem_http_request_duration_seconds":       dto.MetricType_HISTOGRAM,
	"idem_keyed_answers_total":                 dto.MetricType_COUNTER,
	"idem_admin_resolutions_total":             dto.MetricType_COUNTER,
	"idem_forward_refused_total":               dto.MetricType_COUNTER,
	"idem_replays_total":                       dto.MetricType_COUNTER,
	"idem_key_mismatches_total":                dto.MetricType_COUNTER,
	"idem_in_progress_total":                   dto.MetricType_COUNTER,
	"idem_pending_total":                       dto.MetricType_COUNTER,
	"idem_overloaded_total":                    dto.MetricType_COUNTER,
	"idem_executions_total":                    dto.MetricType_COUNTER,
	"idem_adoptions_total":                     dto.MetricType_COUNTER,
	"idem_fence_rejections_total":              dto.MetricType_COUNTER,
	"idem_recovery_passes_total":               dto.MetricType_COUNTER,
	"idem_recovered_total":                     dto.MetricType_COUNTER,
	"idem_decisions_released_total":            dto.MetricType_COUNTER,
	"idem_cleaner_deletions_total":             dto.MetricType_COUNTER,
	"idem_tombstones_written_total":            dto.MetricType_COUNTER,
	"idem_tombstones_cleaned_total":            dto.MetricType_COUNTER,
	"idem_expiry_entries_folded_total":         dto.MetricType_COUNTER,
	"idem_key_expired_total":                   dto.MetricType_COUNTER,
	"idem_contended_replans_total":             dto.MetricType_COUNTER,
	"idem_visibility_debt_paid_total":          dto.MetricType_COUNTER,
	"idem_stale_table_replans_total":           dto.MetricType_COUNTER,
	"idem_contended_pending_total":             dto.MetricType_COUNTER,
	"idem_renewal_batches_total":               dto.MetricType_COUNTER,
	"idem_renewal_writes_total":                dto.MetricType_COUNTER,
	"idem_leases_renewed_total":                dto.MetricType_COUNTER,
	"idem_executor_busy":                       dto.MetricType_GAUGE,
	"idem_active_leases":                       dto.MetricType_GAUGE,
	"idem_executor_busy_by_kind":               dto.MetricType_GAUGE,
	"idem_active_leases_by_kind":               dto.MetricType_GAUGE,
	"idem_oldest_lease_age_seconds":            dto.MetricType_GAUGE,
	"idem_healthy":                             dto.MetricType_GAUGE,
	"idem_sessions_begun_total":                dto.MetricType_COUNTER,
	"idem_sessions_committed_total":            dto.MetricType_COUNTER,
	"idem_sessions_aborted_total":              dto.MetricType_COUNTER,
	"idem_sessions_expired_total":              dto.MetricType_COUNTER,
	"idem_refused_total":                       dto.MetricType_COUNTER,
	"idem_store_refusals_total":                dto.MetricType_COUNTER,
	"idem_wal_fsyncs_total":                    dto.MetricType_COUNTER,
	"idem_wal_groups_total":                    dto.MetricType_COUNTER,
	"idem_wal_entries_total":                   dto.MetricType_COUNTER,
	"idem_wal_bytes_total":                     dto.MetricType_COUNTER,
	"idem_wal_fsync_duration_seconds":          dto.MetricType_HISTOGRAM,
	"idem_wal_group_entries":                   dto.MetricType_HISTOGRAM,
	"idem_checkpoints_total":                   dto.MetricType_COUNTER,
	"idem_checkpoint_deltas_total":             dto.MetricType_COUNTER,
	"idem_checkpoint_failures_total":           dto.MetricType_COUNTER,
	"idem_checkpoint_bytes_total":              dto.MetricType_COUNTER,
	"idem_checkpoint_duration_seconds":         dto.MetricType_HISTOGRAM,
	"idem_checkpoint_size_bytes":               dto.MetricType_GAUGE,
	"idem_engine_keys":                         dto.MetricType_GAUGE,
	"idem_engine_log_since_checkpoint_entries": dto.MetricType_GAUGE,
	"idem_engine_recovery_replayed_bytes":      dto.MetricType_GAUGE,
	"idem_engine_fail_stopped":                 dto.MetricType_GAUGE,
	"idem_engine_descriptor_waits_total":       dto.MetricType_COUNTER,
	"idem_vlog_segments":                       dto.MetricType_GAUGE,
	"idem_vlog_bytes":                          dto.MetricType_GAUGE,
	"idem_vlog_live_bytes":                     dto.MetricType_GAUGE,
	"idem_vlog_spilled_bytes_total":            dto.MetricType_COUNTER,
	"idem_vlog_relocated_bytes_total":          dto.MetricType_COUNTER,
	"idem_vlog_segments_collected_total":       dto.MetricType_COUNTER,
}

// metricsNode is a server over a real engine (with its collector and Health,
// as idemd wires them) in a temporary directory, served by httptest.
type metricsNode struct {
	db *engine.DB
	c  *apitest.Client
}

func newMetricsNode(t *testing.T) *metricsNode {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := engine.Open(t.TempDir(), engine.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() }) // a fail-stopped engine's Close error is expected
	svc, err := receipt.Open(context.Background(), db, receipt.Options{MaintainInterval: -1, CleanInterval: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	ts := httptest.NewServer(New(svc, Options{StoreCollectors: []prometheus.Collector{enginemetrics.New(db.Stats)}, Health: db.Health, Logger: quiet}))
	t.Cleanup(ts.Close)
	return &metricsNode{db: db, c: apitest.NewClient(t, ts.URL)}
}

// scrape is GET /metrics, parsed; it also returns the exposition's text.
func (n *metricsNode) scrape(t *testing.T) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	r := n.c.Do("GET", "/metrics", nil)
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics: %d %s", r.Status, r.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(r.Body))
	if err != nil {
		t.Fatalf("parsing the exposition: %v\n%s", err, r.Body)
	}
	return mfs, string(r.Body)
}

const metricsIncBody = `{"transforms":[{"id":"c","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`

// TestMetrics_OperatorMetrics: after traffic on every route and a
// checkpoint, /metrics exposes exactly the operator metric families, each
// of its type; every histogram has buckets with le labels, a _sum and a
// _count; every labelled family's HELP names each label value it exposes;
// every route has series; and the values add up.
func TestMetrics_OperatorMetrics(t *testing.T) {
	t.Parallel()
	n := newMetricsNode(t)
	batch := func(table, key, body string) *apitest.Response {
		var headers []string
		if key != "" {
			headers = []string{"Idempotency-Key", key}
		}
		return n.c.Do("POST", "/v1/tables/"+table+"/batch", body, headers...)
	}
	n.c.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	n.c.Do("PUT", "/v1/tables/gone", nil).JSON(t, 201, nil)
	batch("t", "", metricsIncBody).JSON(t, 201, nil)
	batch("t", "k", metricsIncBody).JSON(t, 201, nil)
	batch("t", "k", metricsIncBody).JSON(t, 201, nil) // replayed
	batch("t", "k", `{"deletes":["c"]}`).Problem(t, 422)
	n.c.Do("GET", "/v1/tables", nil).JSON(t, 200, nil)
	n.c.Do("GET", "/v1/tables/t/docs/c", nil).JSON(t, 200, nil)
	n.c.Do("GET", "/v1/receipts/t/k", nil).JSON(t, 200, nil)
	if r := n.c.Do("DELETE", "/v1/tables/gone", nil); r.Status != 204 {
		t.Fatalf("drop: %d %s", r.Status, r.Body)
	}
	var sess struct {
		ID string `json:"session_id"`
	}
	n.c.Do("POST", "/v1/sessions", nil).JSON(t, 201, &sess)
	n.c.Do("POST", "/v1/sessions/"+sess.ID+"/batch", `{"table":"t","inserts":[{"id":"s","doc":{}}]}`).JSON(t, 200, nil)
	n.c.Do("GET", "/v1/sessions/"+sess.ID+"/tables/t/docs/s", nil).JSON(t, 200, nil)
	n.c.Do("GET", "/v1/sessions/"+sess.ID, nil).JSON(t, 200, nil)
	n.c.Do("POST", "/v1/sessions/"+sess.ID+"/commit", nil).JSON(t, 201, nil)
	n.c.Do("GET", "/v1/sessions/"+sess.ID+"/receipt", nil).JSON(t, 200, nil)
	n.c.Do("DELETE", "/v1/sessions/"+sess.ID, nil).Problem(t, 409)
	n.c.Do("GET", "/v1/receipts?state=terminal", nil).JSON(t, 200, nil)
	n.c.Do("POST", "/v1/admin/receipts/00112233445566778899aabbccddeeff/resolve", nil).Problem(t, 404)
	n.c.Do("POST", "/v1/admin/backup", `{"name":"b1"}`).Problem(t, 501)
	n.c.Do("GET", "/healthz", nil).JSON(t, 200, nil)
	n.c.Do("GET", "/nope", nil).Problem(t, 404)
	n.c.Do("POST", "/healthz", nil).Problem(t, 405)
	if err := n.db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	n.scrape(t) // so that the scrape below sees a GET /metrics
	mfs, text := n.scrape(t)

	var got, missing, wrong []string
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "idem_") {
			continue
		}
		got = append(got, name)
		want, ok := operatorMetrics[name]
		switch {
		case !ok:
			wrong = append(wrong, name+" (not in operatorMetrics)")
		case mf.GetType() != want:
			wrong = append(wrong, name+" is "+mf.GetType().String()+", want "+want.String())
		}
	}
	for name := range operatorMetrics {
		if mfs[name] == nil {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(wrong)
	if len(missing) > 0 || len(wrong) > 0 {
		t.Fatalf("metric families differ from operatorMetrics\nmissing: %v\nwrong: %v", missing, wrong)
	}

	for _, name := range got {
		mf := mfs[name]
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			for _, suffix := range []string{`_bucket{(.*,)?le="[^"]+"`, `_bucket{(.*,)?le="\+Inf"`, `_sum[ {]`, `_count[ {]`} {
				if !regexp.MustCompile(`(?m)^` + name + suffix).MatchString(text) {
					t.Errorf("histogram %s has no line %s%s", name, name, suffix)
				}
			}
			for _, m := range mf.GetMetric() {
				h := m.GetHistogram()
				if len(h.GetBucket()) < 5 {
					t.Errorf("histogram %s has %d buckets", name, len(h.GetBucket()))
				}
				for _, b := range h.GetBucket() {
					// A bound is a round number, not one a unit
					// conversion left at 30.000000000000004.
					ub := b.GetUpperBound()
					if strconv.FormatFloat(ub, 'g', -1, 64) != strconv.FormatFloat(ub, 'g', 6, 64) {
						t.Errorf("histogram %s has a bucket le=%v", name, ub)
					}
				}
			}
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !mentions(mf.GetHelp(), l.GetValue()) {
					t.Errorf("HELP of %s does not mention %s=%q: %q", name, l.GetName(), l.GetValue(), mf.GetHelp())
				}
			}
		}
	}

	// Every route has series, as has "unmatched".
	seen := map[string]bool{}
	for _, m := range mfs["idem_http_request_duration_seconds"].GetMetric() {
		seen[label(m, "route")] = true
	}
	for _, route := range append(slices.Clone(routePatterns), unmatchedRoute) {
		if !seen[route] {
			t.Errorf("no request series for route %q", route)
		}
	}
	// Only a raw connection makes a malformed request (surface_test.go):
	// here its label value is checked in the HELP alone.
	for _, name := range []string{"idem_http_requests_total", "idem_http_request_duration_seconds"} {
		if help := mfs[name].GetHelp(); !mentions(help, `"`+malformedRoute+`"`) {
			t.Errorf("HELP of %s does not mention route %q: %q", name, malformedRoute, help)
		}
	}

	for _, want := range []string{
		`idem_replays_total 1`,
		`idem_key_mismatches_total 1`,
		`idem_keyed_answers_total{outcome="committed",replayed="false"} 2`, // the keyed batch and the session commit
		`idem_keyed_answers_total{outcome="committed",replayed="true"} 1`,
		`idem_keyed_answers_total{outcome="mismatch",replayed="false"} 1`,
		`idem_keyed_answers_total{outcome="not_applied",replayed="false"} 0`,
		`idem_http_requests_total{code="201",route="POST /v1/tables/{table}/batch"} 3`,
		`idem_http_request_duration_seconds_count{code="201",route="POST /v1/tables/{table}/batch"} 3`,
		`idem_http_requests_total{code="422",route="POST /v1/tables/{table}/batch"} 1`,
		`idem_http_requests_total{code="404",route="unmatched"} 1`,
		`idem_http_requests_total{code="405",route="unmatched"} 1`,
		`idem_http_requests_total{code="200",route="GET /metrics"} 1`,
		`idem_checkpoints_total 1`,
		`idem_checkpoint_duration_seconds_count 1`,
		`idem_checkpoint_failures_total 0`,
		`idem_engine_fail_stopped 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	value := func(name string) float64 {
		t.Helper()
		ms := mfs[name].GetMetric()
		if len(ms) != 1 {
			t.Fatalf("%s has %d series", name, len(ms))
		}
		switch m := ms[0]; {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		}
		t.Fatalf("%s is neither counter nor gauge", name)
		return 0
	}
	histogram := func(name string) *dto.Histogram { return mfs[name].GetMetric()[0].GetHistogram() }
	if fs := histogram("idem_wal_fsync_duration_seconds"); fs.GetSampleCount() == 0 || float64(fs.GetSampleCount()) != value("idem_wal_fsyncs_total") || fs.GetSampleSum() <= 0 {
		t.Errorf("fsync histogram: count %d sum %g, idem_wal_fsyncs_total %g", fs.GetSampleCount(), fs.GetSampleSum(), value("idem_wal_fsyncs_total"))
	}
	// Nothing writes in the background here (maintenance and cleaning are
	// off, no lease is active), so the group counters are at rest.
	if g := histogram("idem_wal_group_entries"); float64(g.GetSampleCount()) != value("idem_wal_groups_total") || g.GetSampleSum() != value("idem_wal_entries_total") {
		t.Errorf("group histogram: count %d sum %g, groups %g entries %g", g.GetSampleCount(), g.GetSampleSum(), value("idem_wal_groups_total"), value("idem_wal_entries_total"))
	}
	if value("idem_checkpoint_bytes_total") <= 0 || value("idem_checkpoint_size_bytes") <= 0 {
		t.Errorf("checkpoint bytes %g, size %g", value("idem_checkpoint_bytes_total"), value("idem_checkpoint_size_bytes"))
	}
}

// mentions reports whether help names v as a word: not as part of a longer
// name or number ("20" is not mentioned by "201").
func mentions(help, v string) bool {
	isWord := func(b byte) bool {
		return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
	}
	for i := 0; ; {
		j := strings.Index(help[i:], v)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(v)
		if (start == 0 || !isWord(help[start-1])) && (end == len(help) || !isWord(help[end])) {
			return true
		}
		i = start + 1
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestMetrics_Documented: the README's list of metrics and the spec's
// description of /metrics name every operator metric.
func TestMetrics_Documented(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	description := pathItemText(t, string(spec), "/metrics")
	for name := range operatorMetrics {
		if !strings.Contains(string(readme), "`"+name+"`") {
			t.Errorf("README.md does not list %s", name)
		}
		if !mentions(description, name) {
			t.Errorf("openapi.yaml's GET /metrics does not list %s", name)
		}
	}
}

// pathItemText is the text of path's item in the spec's paths: the lines
// after "  <path>:" up to the next path or top-level key. (The root module
// has no YAML parser: kin-openapi is the contract module's.)
func pathItemText(t *testing.T, spec, path string) string {
	t.Helper()
	_, rest, ok := strings.Cut(spec, "\n  "+path+":\n")
	if !ok {
		t.Fatalf("openapi.yaml has no path %s", path)
	}
	lines := strings.SplitAfter(rest, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "   ") {
			return strings.Join(lines[:i], "")
		}
	}
	return rest
}

// TestMetrics_RoutePatternsAreServerRoutes: the route list of the request
// metrics' HELP is exactly what server.go registers.
func TestMetrics_RoutePatternsAreServerRoutes(t *testing.T) {
	t.Parallel()
	want := serverRoutes(t)
	got := slices.Sorted(slices.Values(routePatterns))
	if !slices.Equal(got, want) {
		t.Fatalf("routePatterns\n  %s\nserver.go registers\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestMetrics_KeyedOutcomes: a key mismatch is counted as its own outcome,
// an answer without an outcome as rejected, and every outcome an envelope
// can carry is a listed label value.
func TestMetrics_KeyedOutcomes(t *testing.T) {
	t.Parallel()
	m := newMetrics(nil, nil, nil)
	for _, c := range []struct {
		a    receipt.Answer
		want string
	}{
		{receipt.Answer{Envelope: receipt.Envelope{Status: 422, Code: code.KeyMismatch, Outcome: receipt.OutcomeNotApplied}}, outcomeMismatch},
		{receipt.Answer{Envelope: receipt.Envelope{Status: 400, Code: code.InvalidRequest}}, outcomeRejected},
		{receipt.Answer{Envelope: receipt.Envelope{Status: 409, Code: code.RequestInProgress, Outcome: receipt.OutcomePending}}, receipt.OutcomePending},
		{receipt.Answer{Envelope: receipt.Envelope{Status: 201, Outcome: receipt.OutcomeCommitted}, Replayed: true}, receipt.OutcomeCommitted},
	} {
		replayed := "false"
		if c.a.Replayed {
			replayed = "true"
		}
		before := counterValue(t, m.outcomes.WithLabelValues(c.want, replayed))
		m.keyed(c.a)
		if after := counterValue(t, m.outcomes.WithLabelValues(c.want, replayed)); after != before+1 {
			t.Errorf("%s answer: outcome=%s replayed=%s went from %g to %g", c.a.Code, c.want, replayed, before, after)
		}
	}
	for _, o := range []string{receipt.OutcomeCommitted, receipt.OutcomeAborted, receipt.OutcomeNotApplied, receipt.OutcomePending} {
		if !slices.Contains(keyedOutcomes, o) {
			t.Errorf("keyedOutcomes lacks the envelope outcome %q", o)
		}
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestMetrics_FailStoppedGauge: idem_engine_fail_stopped is 0 on a healthy
// engine and 1 once an fsync failure fail-stopped it. Not parallel: the
// failpoint is process-wide.
func TestMetrics_FailStoppedGauge(t *testing.T) {
	testsupport.RequireFailpoints(t)
	n := newMetricsNode(t)
	if _, text := n.scrape(t); !strings.Contains(text, "\nidem_engine_fail_stopped 0\n") {
		t.Fatal("a healthy engine is not idem_engine_fail_stopped 0")
	}
	n.c.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	disarm := testsupport.Arm(t, fault.WALSyncBefore, `return("eio")`)
	r, err := n.c.Try("POST", "/v1/tables/t/batch", `{"inserts":[{"id":"a","doc":{}}]}`)
	disarm()
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 500 && r.Status != 503 {
		t.Fatalf("batch during a failed fsync answered %d", r.Status)
	}
	if _, text := n.scrape(t); !strings.Contains(text, "\nidem_engine_fail_stopped 1\n") {
		t.Fatal("a fail-stopped engine is not idem_engine_fail_stopped 1")
	}
}
