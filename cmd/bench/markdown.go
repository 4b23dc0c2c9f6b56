package main

import (
	"fmt"
	"image/color"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// writeMarkdown writes the -out report: the machine, a summary of every
// target, and per suite its table, notes and charts (PNG files beside the
// report, named after it).
func writeMarkdown(path string, rs *runState, args []string, took time.Duration) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	var b strings.Builder
	mdMachine(&b, rs, args, took)
	mdTargets(&b, rs.suites)
	base := strings.TrimSuffix(path, filepath.Ext(path))
	head, err := targetsChart(base, rs.suites)
	if err != nil {
		return fmt.Errorf("targets chart: %w", err)
	}
	if head != nil {
		fmt.Fprintf(&b, "![%s](%s)\n\n", head.title, filepath.Base(head.file))
	}
	if err := mdPeers(&b, base, rs.suites); err != nil {
		return err
	}
	for _, s := range rs.suites {
		if err := mdSuite(&b, base, s); err != nil {
			return err
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o640)
}

// mdMachine writes the report's title, how it was made and the machine.
func mdMachine(b *strings.Builder, rs *runState, args []string, took time.Duration) {
	m := describeMachine()
	fmt.Fprintf(b, "# Idem benchmark report\n\n")
	fmt.Fprintf(b, "Generated %s by `go run ./cmd/bench %s` (%s).\n\n", time.Now().Format(time.RFC3339), strings.Join(args, " "), took.Round(time.Second))
	fmt.Fprintf(b, "Every number below comes from this one run: the physical floors (raw fdatasync, raw group commit, raw tidwall batches) were measured on the same disk minutes apart from the cases they judge, because the disk's speed drifts from day to day. Latencies are HDR-histogram percentiles of the measured window; warm-up is excluded.\n\n")
	fmt.Fprintf(b, "## Machine\n\n| | |\n|---|---|\n")
	fmt.Fprintf(b, "| CPU | %s |\n| cores | %d |\n| RAM | %s |\n| kernel | %s |\n| OS/arch | %s |\n", m.CPU, m.Cores, m.RAM, m.Kernel, m.OS)
	fmt.Fprintf(b, "| data dir file system | %s |\n| Go | %s, GOMAXPROCS=%d |\n", rs.fs, runtime.Version(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(b, "| load average (1 min) at start / end | %.2f / %.2f |\n", rs.loadStart, rs.loadEnd)
	fmt.Fprintf(b, "| measured time per case | %s |\n| batch | %d documents of %d bytes |\n\n", rs.opts.Duration, rs.opts.BatchDocs, docBytes)
	if rs.opts.Quick {
		fmt.Fprintf(b, "> Quick tour: short cases and %d-key stores. Name suites with `-suite` for full-size runs.\n\n", rs.opts.Keys)
	}
}

// mdTargets writes every target in one table, so a reader sees what held
// at a glance.
func mdTargets(b *strings.Builder, suites []suiteRun) {
	fmt.Fprintf(b, "## Targets (docs/design.md §12)\n\n")
	var rows []string
	for _, s := range suites {
		for _, r := range s.Results {
			for _, t := range r.Targets {
				rows = append(rows, fmt.Sprintf("| %s | %s@%d | %s | %s | %s |", s.Name, r.Case, r.Concurrency, mdEscape(t.Want), mdEscape(t.Got), verdict(t)))
			}
		}
	}
	if len(rows) == 0 {
		fmt.Fprintf(b, "No target applied to this run's cases.\n\n")
		return
	}
	fmt.Fprintf(b, "| suite | case | target | got | verdict |\n|---|---|---|---|---|\n%s\n\n", strings.Join(rows, "\n"))
}

func verdict(t Target) string {
	if t.Met {
		return "met"
	}
	return "**missed**"
}

// mdPeers writes the peer charts and PostgreSQL's settings, when the run
// had the peer suite.
func mdPeers(b *strings.Builder, base string, suites []suiteRun) error {
	peers, err := peerCharts(base, suites)
	if err != nil {
		return fmt.Errorf("peer charts: %w", err)
	}
	if len(peers) == 0 {
		return nil
	}
	fmt.Fprintf(b, "## Idem beside its peer\n\nThe same work on the same axes, from this run: Idem as a library and behind idemd's HTTP API, PostgreSQL with the Stripe/brandur idempotency-key flow as a library and behind a `net/http` server with the same route and bodies (suite `peer`).\n\n")
	for _, c := range peers {
		fmt.Fprintf(b, "![%s](%s)\n", c.title, filepath.Base(c.file))
	}
	fmt.Fprintf(b, "\nPostgreSQL's settings, read from the server (rows pg-tuned-* are the tuned profile):\n\n")
	for _, l := range peerSettingsLines(suites) {
		fmt.Fprintf(b, "- `%s`\n", l)
	}
	fmt.Fprintf(b, "\n")
	return nil
}

// mdSuite writes one suite's section: how it ended, its table, the notes
// (targets and extra figures) and its charts.
func mdSuite(b *strings.Builder, base string, s suiteRun) error {
	fmt.Fprintf(b, "## Suite `%s`\n\n%s.\n\n", s.Name, s.Doc)
	if s.Skipped != "" {
		fmt.Fprintf(b, "Skipped: %s.\n\n", s.Skipped)
	}
	if s.Err != nil {
		fmt.Fprintf(b, "**The suite failed:** %s\n\n", mdEscape(s.Err.Error()))
	}
	if len(s.Results) == 0 {
		return nil
	}
	fmt.Fprintf(b, "| case | conc | ops | seconds | ops/s | p50 µs | p90 µs | p99 µs | p99.9 µs | fsyncs/s | ops/fsync | × fsync-group |\n")
	fmt.Fprintf(b, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	var notes []string
	for _, r := range s.Results {
		mdRow(b, r)
		for _, t := range r.Targets {
			notes = append(notes, fmt.Sprintf("- %s — %s: %s", verdict(t), mdEscape(t.Want), mdEscape(t.Got)))
		}
		if x := r.extraText(); x != "" && !r.Floor {
			notes = append(notes, fmt.Sprintf("- %s@%d: %s", r.Case, r.Concurrency, mdEscape(x)))
		}
	}
	fmt.Fprintf(b, "\n")
	if len(notes) > 0 {
		fmt.Fprintf(b, "%s\n\n", strings.Join(notes, "\n"))
	}
	charts, err := suiteCharts(base, s)
	if err != nil {
		return fmt.Errorf("charts of %s: %w", s.Name, err)
	}
	for _, c := range charts {
		fmt.Fprintf(b, "![%s](%s)\n", c.title, filepath.Base(c.file))
	}
	if len(charts) > 0 {
		fmt.Fprintf(b, "\n")
	}
	return nil
}

// mdRow writes one result as a row of its suite's table.
func mdRow(b *strings.Builder, r Result) {
	name := r.Case
	if r.Floor {
		name += " (floor)"
	}
	perFsync, ratio := "", ""
	if r.FsyncsPerSec > 0 {
		perFsync = fmt.Sprintf("%.1f", r.OpsPerSec/r.FsyncsPerSec)
	}
	if r.floorCase != "" {
		ratio = fmt.Sprintf("%.3f", r.ratioToFloor)
	}
	fmt.Fprintf(b, "| %s | %d | %d | %.3f | %.0f | %.1f | %.1f | %.1f | %.1f | %.0f | %s | %s |\n",
		name, r.Concurrency, r.Ops, r.Seconds, r.OpsPerSec, r.P50us, r.P90us, r.P99us, r.P999us, r.FsyncsPerSec, perFsync, ratio)
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

type chart struct{ title, file string }

// suiteCharts draws throughput against concurrency (cases measured at more
// than one concurrency, with the fsync-group floor as a line) and the
// latency percentiles of every case.
func suiteCharts(base string, s suiteRun) ([]chart, error) {
	cases := groupCases(s.Results)
	var out []chart
	c, err := throughputChart(base, s.Name, cases)
	if err != nil {
		return nil, err
	}
	if c != nil {
		out = append(out, *c)
	}
	if c, err = latencyChart(base, s.Name, cases); err != nil {
		return nil, err
	}
	if c != nil {
		out = append(out, *c)
	}
	return out, nil
}

// chartCases are a suite's results grouped by case, in first-seen order,
// and its fsync-group floor if it has one.
type chartCases struct {
	order  []string
	byName map[string][]Result
	group  *Result
}

func groupCases(results []Result) chartCases {
	cs := chartCases{byName: map[string][]Result{}}
	for i, r := range results {
		if r.Floor {
			if r.Case == floorGroup {
				cs.group = &results[i]
			}
			continue
		}
		if _, ok := cs.byName[r.Case]; !ok {
			cs.order = append(cs.order, r.Case)
		}
		cs.byName[r.Case] = append(cs.byName[r.Case], r)
	}
	return cs
}

// throughputChart draws ops/s against concurrency of every case measured
// at two concurrencies or more, log-log, with the fsync-group floor
// dashed; nil when no case was.
func throughputChart(base, suite string, cases chartCases) (*chart, error) {
	var lines []any
	concs := map[int]bool{}
	for _, name := range cases.order {
		rs := cases.byName[name]
		if len(rs) < 2 {
			continue
		}
		slices.SortFunc(rs, func(a, b Result) int { return a.Concurrency - b.Concurrency })
		var xy plotter.XYs
		for _, r := range rs {
			if r.OpsPerSec > 0 {
				xy = append(xy, plotter.XY{X: float64(r.Concurrency), Y: r.OpsPerSec})
				concs[r.Concurrency] = true
			}
		}
		if len(xy) >= 2 {
			lines = append(lines, name, xy)
		}
	}
	if len(lines) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = suite + ": throughput vs concurrency"
	p.X.Label.Text = "concurrency (closed-loop workers)"
	p.Y.Label.Text = "ops/s"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	cs := slices.Sorted(maps.Keys(concs))
	var ticks []plot.Tick
	for _, c := range cs {
		ticks = append(ticks, plot.Tick{Value: float64(c), Label: strconv.Itoa(c)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return nil, err
	}
	if g := cases.group; g != nil && g.OpsPerSec > 0 && len(cs) > 0 {
		fl, err := plotter.NewLine(plotter.XYs{{X: float64(cs[0]), Y: g.OpsPerSec}, {X: float64(cs[len(cs)-1]), Y: g.OpsPerSec}})
		if err != nil {
			return nil, err
		}
		fl.Color = color.Gray{Y: 128}
		fl.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		p.Add(fl)
		p.Legend.Add("fsync-group floor", fl)
	}
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	file := base + "-" + suite + "-throughput.png"
	if err := saveBeside(p, file, chartWidth, chartHeight); err != nil {
		return nil, err
	}
	return &chart{suite + " throughput", file}, nil
}

// latencyChart draws the latency percentiles, one line per case and
// concurrency; nil when no result has all four.
func latencyChart(base, suite string, cases chartCases) (*chart, error) {
	pcts := []struct {
		label string
		x     float64 // -log10(1-q): 50% → 0.3, 99.9% → 3
	}{{"p50", -math.Log10(0.5)}, {"p90", 1}, {"p99", 2}, {"p99.9", 3}}
	var lines []any
	for _, name := range cases.order {
		for _, r := range cases.byName[name] {
			vals := []float64{r.P50us, r.P90us, r.P99us, r.P999us}
			var xy plotter.XYs
			for i, v := range vals {
				if v > 0 {
					xy = append(xy, plotter.XY{X: pcts[i].x, Y: v})
				}
			}
			if len(xy) == len(vals) {
				lines = append(lines, fmt.Sprintf("%s c=%d", name, r.Concurrency), xy)
			}
		}
	}
	if len(lines) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = suite + ": latency percentiles"
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency per call (µs)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	var ticks []plot.Tick
	for _, pc := range pcts {
		ticks = append(ticks, plot.Tick{Value: pc.x, Label: pc.label})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return nil, err
	}
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	file := base + "-" + suite + "-latency.png"
	if err := saveBeside(p, file, chartWidth, chartHeight); err != nil {
		return nil, err
	}
	return &chart{suite + " latency percentiles", file}, nil
}
