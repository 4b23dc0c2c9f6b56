package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Result is one report line. The first nine fields are the contract of
// docs/design.md §11; everything after them is an allowed extra.
type Result struct {
	Suite        string
	Case         string
	Concurrency  int
	Ops          uint64
	Seconds      float64
	OpsPerSec    float64
	P50us        float64
	P99us        float64
	FsyncsPerSec float64
	// P90us and P999us complete the latency picture (JSON extras, charts).
	P90us, P999us float64

	// Floor marks a physical floor line.
	Floor bool
	// NoFloorRatio leaves ratio_to_floor out, for cases whose rate is not a
	// durable-write rate (reopen time, memory).
	NoFloorRatio bool
	// Targets are the performance targets this case is judged by.
	Targets []Target
	// Extra holds suite-specific fields such as bytes_per_key.
	Extra map[string]any

	// Filled by Report.
	floorCase    string
	ratioToFloor float64
}

// Target is one performance target (docs/design.md §12) and whether it held.
type Target struct {
	Want string `json:"want"` // e.g. "apply@64 >= 0.60 x fsync-group"
	Got  string `json:"got"`  // the observed figure
	Met  bool   `json:"met"`
	// Score is the figure against its bound: 1 is exactly on it, above 1
	// better (got/bound for a floor, bound/got for a ceiling); 0 when the
	// figure is not a number. The report's headline chart draws it.
	Score float64 `json:"score,omitempty"`
}

// atLeast scores a figure that must reach bound.
func atLeast(got, bound float64) float64 {
	if bound <= 0 {
		return 0
	}
	return got / bound
}

// atMost scores a figure that must stay within bound (a figure of 0 is
// scored as 100 times better: the chart's axis ends there).
func atMost(got, bound float64) float64 {
	if got <= 0 {
		return 100
	}
	return bound / got
}

// Set adds an extra field.
func (r *Result) Set(key string, v any) {
	if r.Extra == nil {
		r.Extra = map[string]any{}
	}
	r.Extra[key] = v
}

// Report fills in the run-wide fields and the floor ratio, writes the JSON
// line (with -json) and keeps the result for the suite's table.
func (e *Env) Report(r Result) {
	if r.Suite == "" {
		r.Suite = e.suite
	}
	if f := e.Floors(); f != nil && !r.Floor && !r.NoFloorRatio && f.Group.OpsPerSec > 0 {
		r.floorCase = f.Group.Case
		r.ratioToFloor = r.OpsPerSec / f.Group.OpsPerSec
	}
	e.results = append(e.results, r)
	e.run.all = append(e.run.all, r)
	if e.Opts.JSON {
		line, err := r.json(e.run)
		if err != nil {
			panic(err) // only unencodable Extra values, a programming error
		}
		e.run.out.Write(append(line, '\n'))
	}
}

type field struct {
	k string
	v any
}

// json encodes the contract fields first, in contract order, then the
// extras sorted by name, so lines diff well between runs.
func (r Result) json(run *runState) ([]byte, error) {
	var b, val bytes.Buffer
	enc := json.NewEncoder(&val)
	enc.SetEscapeHTML(false) // targets read ">=", not "\u003e="
	n := 0
	add := func(k string, v any) error {
		val.Reset()
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("field %s: %w", k, err)
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		b.WriteString(strconv.Quote(k))
		b.WriteByte(':')
		b.Write(bytes.TrimSuffix(val.Bytes(), []byte("\n")))
		return nil
	}
	b.WriteByte('{')
	fields := []field{
		{"suite", r.Suite}, {"case", r.Case}, {"concurrency", r.Concurrency}, {"ops", r.Ops},
		{"seconds", round(r.Seconds, 4)}, {"ops_per_sec", round(r.OpsPerSec, 1)},
		{"p50_us", round(r.P50us, 1)}, {"p99_us", round(r.P99us, 1)},
		{"fsyncs_per_sec", round(r.FsyncsPerSec, 1)},
	}
	if r.P90us > 0 || r.P999us > 0 {
		fields = append(fields, field{"p90_us", round(r.P90us, 1)}, field{"p999_us", round(r.P999us, 1)})
	}
	fields = append(fields, []field{
		{"go_version", runtime.Version()}, {"gomaxprocs", runtime.GOMAXPROCS(0)}, {"fs", run.fs},
		{"value_bytes", run.opts.ValueBytes},
	}...)
	if r.Floor {
		fields = append(fields, field{"floor", true})
	}
	if r.floorCase != "" {
		fields = append(fields, field{"floor_case", r.floorCase}, field{"ratio_to_floor", round(r.ratioToFloor, 3)})
	}
	if r.FsyncsPerSec > 0 {
		fields = append(fields, field{"ops_per_fsync", round(r.OpsPerSec/r.FsyncsPerSec, 2)})
	}
	if len(r.Targets) > 0 {
		fields = append(fields, field{"targets", r.Targets}, field{"targets_met", r.targetsMet()})
	}
	for _, f := range fields {
		if err := add(f.k, f.v); err != nil {
			return nil, err
		}
	}
	keys := make([]string, 0, len(r.Extra))
	for k := range r.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := add(k, r.Extra[k]); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (r Result) targetsMet() bool {
	for _, t := range r.Targets {
		if !t.Met {
			return false
		}
	}
	return true
}

// round keeps JSON readable; NaN and Inf (a zero-length window) become 0
// because JSON cannot carry them.
func round(x float64, digits int) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// printTable writes the suite's results as an aligned table, then every
// target with its verdict.
func (e *Env) printTable(w io.Writer) {
	run := e.run
	fmt.Fprintf(w, "\n== suite %s  (%s, GOMAXPROCS=%d, fs=%s, value=%dB, duration=%s)\n",
		e.suite, runtime.Version(), runtime.GOMAXPROCS(0), run.fs, run.opts.ValueBytes, run.opts.Duration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// AlignRight suits the numbers; padding the names to one width first
	// keeps the case column left-aligned.
	names := make([]string, len(e.results))
	width := len("case")
	for i, r := range e.results {
		names[i] = r.Case
		if r.Floor {
			names[i] += " (floor)"
		}
		width = max(width, len(names[i]))
	}
	fmt.Fprintf(tw, "%-*s\tconc\tops\tseconds\tops/s\tp50 µs\tp99 µs\tfsyncs/s\tops/fsync\t× floor\ttarget\t\n", width, "case")
	var targets []string
	for i, r := range e.results {
		name := fmt.Sprintf("%-*s", width, names[i])
		ratio, perFsync, verdict := "", "", ""
		if r.floorCase != "" {
			ratio = fmt.Sprintf("%.3f", r.ratioToFloor)
		}
		if r.FsyncsPerSec > 0 {
			perFsync = fmt.Sprintf("%.1f", r.OpsPerSec/r.FsyncsPerSec)
		}
		if len(r.Targets) > 0 {
			verdict = "ok"
			if !r.targetsMet() {
				verdict = "MISS"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t%.0f\t%.1f\t%.1f\t%.0f\t%s\t%s\t%s\t\n",
			name, r.Concurrency, r.Ops, r.Seconds, r.OpsPerSec, r.P50us, r.P99us, r.FsyncsPerSec,
			perFsync, ratio, verdict)
		for _, t := range r.Targets {
			v := "ok  "
			if !t.Met {
				v = "MISS"
			}
			targets = append(targets, fmt.Sprintf("  %s  %s: %s", v, t.Want, t.Got))
		}
		if extras := r.extraText(); extras != "" {
			targets = append(targets, fmt.Sprintf("  info  %s c=%d: %s", r.Case, r.Concurrency, extras))
		}
	}
	tw.Flush()
	if e.skipped != "" {
		fmt.Fprintf(w, "  skipped: %s\n", e.skipped)
	}
	if len(targets) > 0 {
		fmt.Fprintln(w, strings.Join(targets, "\n"))
	}
}

func (r Result) extraText() string {
	keys := make([]string, 0, len(r.Extra))
	for k := range r.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		v := r.Extra[k]
		if f, ok := v.(float64); ok {
			v = strconv.FormatFloat(f, 'f', -1, 64)
		}
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	return strings.Join(parts, " ")
}
