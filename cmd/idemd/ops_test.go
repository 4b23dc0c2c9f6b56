package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/idemdb/idem/internal/apitest"
)

// opsFiles are the operator files whose metric names a live idemd must
// expose: the alert rules and the Grafana dashboard (ops/).
var opsFiles = []string{"../../ops/idem.rules.yml", "../../ops/idem.dashboard.json"}

// externalMetrics are the names the ops files read from other exporters:
// Prometheus's own up, node_exporter's file-system bytes, etcd's quota.
var externalMetrics = []string{
	"up",
	"node_filesystem_avail_bytes", "node_filesystem_size_bytes",
	"etcd_mvcc_db_total_size_in_bytes", "etcd_server_quota_backend_bytes",
}

var (
	idemName     = regexp.MustCompile(`\bidem_[a-z0-9_]+`)
	externalName = regexp.MustCompile(`\b(up|node_[a-z0-9_]+|etcd_[a-z0-9_]+)\b`)
	yamlComment  = regexp.MustCompile(`(?m)^\s*#.*$`)
)

// TestOps_MetricsExist: every idem_* metric the alert rules and the
// dashboard name is a family a live idemd's /metrics exposes (a
// histogram's _bucket, _sum and _count series count as its family), and
// every other name they read is one of externalMetrics. A renamed metric
// would leave an alert that can never fire.
func TestOps_MetricsExist(t *testing.T) {
	p := startRun(t, "-addr", "127.0.0.1:0", "-data", t.TempDir())
	c := apitest.NewClient(t, "http://"+p.addr)
	c.Do("GET", "/metrics", nil) // so that the request families have a series
	r := c.Do("GET", "/metrics", nil)
	if r.Status != 200 {
		t.Fatalf("metrics: %d", r.Status)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(r.Body))
	if err != nil {
		t.Fatal(err)
	}
	exposed := func(name string) bool {
		if mfs[name] != nil {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && mfs[base] != nil {
				return true
			}
		}
		return false
	}
	for _, f := range opsFiles {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text = yamlComment.ReplaceAll(text, nil) // prose, not queries
		names := idemName.FindAllString(string(text), -1)
		if len(names) == 0 {
			t.Fatalf("%s names no idem_ metric", f)
		}
		for _, n := range slices.Compact(slices.Sorted(slices.Values(names))) {
			if !exposed(n) {
				t.Errorf("%s: idemd exposes no metric %s", filepath.Base(f), n)
			}
		}
		for _, m := range externalName.FindAllStringSubmatch(string(text), -1) {
			if !slices.Contains(externalMetrics, m[1]) {
				t.Errorf("%s: %s is neither idemd's nor a known exporter's", filepath.Base(f), m[1])
			}
		}
	}
}
