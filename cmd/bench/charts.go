package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Report charts across suites: Idem beside its peers on the same axes, one
// chart per metric, and the headline chart of every target's score. Every
// chart's legend is drawn beside the plotting area, never over the data.

const (
	chartWidth  = 8 * vg.Inch
	chartHeight = 4.5 * vg.Inch
)

// saveBeside saves p as a PNG of w × h with its legend in a column to the
// right of the plot, sized to the legend's widest entry.
func saveBeside(p *plot.Plot, file string, w, h vg.Length) error {
	leg := p.Legend
	p.Legend = plot.NewLegend() // nothing left to draw over the data
	leg.Top, leg.Left = true, true
	img := vgimg.New(w, h)
	dc := draw.New(img)
	legendW := vg.Length(0)
	if r := leg.Rectangle(dc); r.Max.X > r.Min.X {
		legendW = r.Max.X - r.Min.X + vg.Points(12)
	}
	p.Draw(draw.Crop(dc, 0, -legendW, 0, 0))
	if legendW > 0 {
		lc := draw.Crop(dc, w-legendW+vg.Points(6), 0, 0, -vg.Points(24))
		leg.Draw(lc)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// peerMetric is one metric compared across suites: Idem's cases and the
// peer's that do the same work.
type peerMetric struct {
	name, title string
	series      []seriesRef
}

// seriesRef names one case of one suite and its label in the chart.
type seriesRef struct{ suite, caseName, label string }

// tunedPeer names the tuned profile's rows (pg-tuned-*) in the charts.
var tunedPeer = peerProfile{label: "tuned", tuned: true}

var peerMetrics = []peerMetric{
	{"keyed", "keyed batches (new Idempotency-Key each)", []seriesRef{
		{"receipts", "keyed", "Idem library"},
		{"http", "keyed", "Idem HTTP (idemd's API)"},
		{"peer", "pg-keyed-pipe", "PostgreSQL library, pipelined"},
		{"peer", "pg-keyed", "PostgreSQL library"},
		{"peer", casePGHTTPKeyed, "PostgreSQL behind net/http"},
		{"peer", tunedPeer.caseName("pg-keyed-pipe"), "PostgreSQL tuned, library, pipelined"},
		{"peer", tunedPeer.caseName(casePGHTTPKeyed), "PostgreSQL tuned, behind net/http"},
	}},
	{"replay", "replay of a finished key", []seriesRef{
		{"receipts", "replay", "Idem library"},
		{"http", "replay", "Idem HTTP (idemd's API)"},
		{"peer", "pg-replay", "PostgreSQL library (SELECT)"},
		{"peer", casePGHTTPReplay, "PostgreSQL behind net/http"},
		{"peer", tunedPeer.caseName("pg-replay"), "PostgreSQL tuned, library (SELECT)"},
		{"peer", tunedPeer.caseName(casePGHTTPReplay), "PostgreSQL tuned, behind net/http"},
	}},
	{"nokey", "batches without a key", []seriesRef{
		{"receipts", "fast", "Idem library (fast path)"},
		{"http", "fast", "Idem HTTP (fast path)"},
		{"peer", "pg-nokey", "PostgreSQL library"},
		{"peer", casePGHTTPNoKey, "PostgreSQL behind net/http"},
		{"peer", tunedPeer.caseName("pg-nokey"), "PostgreSQL tuned, library"},
		{"peer", tunedPeer.caseName(casePGHTTPNoKey), "PostgreSQL tuned, behind net/http"},
	}},
}

// peerCharts draws, per metric, throughput and p50 latency against
// concurrency for Idem's cases and the peer's of this run. A metric is
// drawn only when the run measured both sides.
func peerCharts(base string, suites []suiteRun) ([]chart, error) {
	var out []chart
	for _, m := range peerMetrics {
		ps := collectPeerSeries(suites, m)
		if !ps.idem || !ps.peer {
			continue
		}
		for _, v := range []struct {
			what, unit, file string
			lines            []any
		}{
			{"throughput", "requests/s", "rate", ps.rates},
			{"p50 latency", "µs per request", "p50", ps.p50s},
		} {
			p := plot.New()
			p.Title.Text = fmt.Sprintf("Idem and PostgreSQL: %s, %s", m.title, v.what)
			p.X.Label.Text = "concurrency (closed-loop clients)"
			p.Y.Label.Text = v.unit
			concAxis(p, ps.concs)
			p.Y.Scale = plot.LogScale{}
			p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
			if err := plotutil.AddLinePoints(p, v.lines...); err != nil {
				return nil, err
			}
			p.Legend.TextStyle.Font.Size = vg.Points(9)
			file := fmt.Sprintf("%s-vs-peer-%s-%s.png", base, m.name, v.file)
			if err := saveBeside(p, file, chartWidth, chartHeight); err != nil {
				return nil, err
			}
			out = append(out, chart{fmt.Sprintf("%s: Idem and PostgreSQL, %s", m.title, v.what), file})
		}
	}
	return out, nil
}

// peerSeries are one metric's lines (label, points pairs, as plotutil
// takes them), the concurrencies they span, and whether Idem's side and
// the peer's each have one: a chart needs both.
type peerSeries struct {
	rates, p50s []any
	concs       map[int]bool
	idem, peer  bool
}

func collectPeerSeries(suites []suiteRun, m peerMetric) peerSeries {
	ps := peerSeries{concs: map[int]bool{}}
	for _, ref := range m.series {
		rs := findSeries(suites, ref)
		if len(rs) == 0 {
			continue
		}
		if ref.suite == "peer" {
			ps.peer = true
		} else {
			ps.idem = true
		}
		var rate, lat plotter.XYs
		for _, r := range rs {
			ps.concs[r.Concurrency] = true
			rate = append(rate, plotter.XY{X: float64(r.Concurrency), Y: r.OpsPerSec})
			if r.P50us > 0 {
				lat = append(lat, plotter.XY{X: float64(r.Concurrency), Y: r.P50us})
			}
		}
		ps.rates = append(ps.rates, ref.label, rate)
		if len(lat) > 0 {
			ps.p50s = append(ps.p50s, ref.label, lat)
		}
	}
	return ps
}

// findSeries is ref's measured rows, by concurrency.
func findSeries(suites []suiteRun, ref seriesRef) []Result {
	for _, s := range suites {
		if s.Name != ref.suite {
			continue
		}
		var out []Result
		for _, r := range s.Results {
			if r.Case == ref.caseName && !r.Floor && r.OpsPerSec > 0 {
				out = append(out, r)
			}
		}
		slices.SortFunc(out, func(a, b Result) int { return a.Concurrency - b.Concurrency })
		return out
	}
	return nil
}

// concAxis makes p's x axis a log scale ticked at the concurrencies.
func concAxis(p *plot.Plot, concs map[int]bool) {
	p.X.Scale = plot.LogScale{}
	var cs []int
	for c := range concs {
		cs = append(cs, c)
	}
	slices.Sort(cs)
	var ticks []plot.Tick
	for _, c := range cs {
		ticks = append(ticks, plot.Tick{Value: float64(c), Label: strconv.Itoa(c)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
}

// scoreMin and scoreMax bound the headline chart's axis: a target missed
// or met by more is drawn at the edge.
const (
	scoreMin = 0.05
	scoreMax = 100
)

// targetsChart draws every scored target of the run as a bar: its figure
// against its bound, on a log axis where 1 is the target, met to the
// right of the line and missed to the left.
func targetsChart(base string, suites []suiteRun) (*chart, error) {
	type bar struct {
		label string
		score float64
		met   bool
	}
	var bars []bar
	for _, s := range suites {
		for _, r := range s.Results {
			for _, t := range r.Targets {
				if t.Score <= 0 || math.IsInf(t.Score, 0) || math.IsNaN(t.Score) {
					continue
				}
				bars = append(bars, bar{fmt.Sprintf("%s: %s", s.Name, shorten(t.Want, 64)), min(max(t.Score, scoreMin), scoreMax), t.Met})
			}
		}
	}
	if len(bars) == 0 {
		return nil, nil
	}
	lo, hi := 0.1, 10.0
	for _, b := range bars {
		lo, hi = min(lo, b.score/1.5), max(hi, b.score*1.5)
	}
	lo, hi = max(lo, scoreMin), min(hi, scoreMax)
	slices.Reverse(bars) // the first target at the top
	p := plot.New()
	p.Title.Text = "Targets (docs/design.md §12 and the issues): figure against bound"
	p.X.Label.Text = "score (log): 1 = exactly the target; right of the line met, left missed"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.X.Min, p.X.Max = lo, hi
	labels := make([]string, len(bars))
	for i, b := range bars {
		labels[i] = b.label
		pts := plotter.XYs{{X: lo, Y: float64(i)}, {X: b.score, Y: float64(i)}}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		l.Width = vg.Points(7)
		l.Color = color.RGBA{R: 40, G: 150, B: 70, A: 255}
		if !b.met {
			l.Color = color.RGBA{R: 200, G: 50, B: 40, A: 255}
		}
		p.Add(l)
	}
	one, err := plotter.NewLine(plotter.XYs{{X: 1, Y: -0.7}, {X: 1, Y: float64(len(bars)) - 0.3}})
	if err != nil {
		return nil, err
	}
	one.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(one)
	p.NominalY(labels...)
	p.Y.Tick.Label.Font.Size = vg.Points(8)
	file := base + "-targets.png"
	h := vg.Points(float64(60 + 16*len(bars)))
	if err := p.Save(11*vg.Inch, h, file); err != nil {
		return nil, err
	}
	return &chart{"every target's score in this run", file}, nil
}

// shorten cuts s to n runes with an ellipsis.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
