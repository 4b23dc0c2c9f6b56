package docscheck

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"testing"
)

// benchDoc quotes the report's RAM figures once, for the other docs to
// link to; benchReport is cmd/bench's generated report they come from.
const (
	benchDoc    = "docs/benchmarks.md"
	benchReport = "docs/bench/report.md"
)

// ramFigures maps a row of benchmarks.md's "RAM per retained item" table
// to the report's recovery case (by its name's ending) and the figure in
// that case's note.
var ramFigures = []struct{ row, caseSuffix, key string }{
	{"retained terminal receipt", "-receipts", "bytes_per_receipt"},
	{"retained terminal receipt, every value in RAM", "-receipts-in-ram", "bytes_per_receipt"},
	{"tombstone", "-tombstones", "bytes_per_tombstone"},
	{"stored document", "-docs", "bytes_per_doc"},
}

// TestBenchmarks_RAMFiguresAreTheReports: the RAM per item benchmarks.md
// states is the generated report's, rounded to the byte, so regenerating
// the report without updating the page fails.
func TestBenchmarks_RAMFiguresAreTheReports(t *testing.T) {
	root := repoRoot(t)
	doc, report := readFile(t, root, benchDoc), readFile(t, root, benchReport)
	for _, f := range ramFigures {
		note := regexp.MustCompile(`(?m)^- reopen-\w+` + regexp.QuoteMeta(f.caseSuffix) + `@1: .*\b` + f.key + `=([\d.]+)`)
		m := note.FindStringSubmatch(report)
		if m == nil {
			t.Errorf("%s has no %s in a reopen-…%s note", benchReport, f.key, f.caseSuffix)
			continue
		}
		measured, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		row := regexp.MustCompile(`(?m)^\| ` + regexp.QuoteMeta(f.row) + ` \| \**(\d+) B\**`)
		q := row.FindStringSubmatch(doc)
		if q == nil {
			t.Errorf("%s has no row %q with a figure in B", benchDoc, f.row)
			continue
		}
		if want := fmt.Sprint(math.Round(measured)); q[1] != want {
			t.Errorf("%s gives %q %s B; %s measured %s (%s)", benchDoc, f.row, q[1], benchReport, m[1], f.key)
		}
	}
}
