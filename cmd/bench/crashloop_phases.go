package main

// What each restart's open spent its time on, from idemd's "recovered"
// line: the chain it loaded and how long that took, against the log it
// replayed. Issue 38's aim asks the time to healthy to stay flat while the
// store grows; these say which part grows with it, and how fast the chain
// would have to load for the aim to hold.

import "time"

// openLine is the part of idemd's "idemd: recovered" line the loop reads.
type openLine struct {
	Replayed   int64  `json:"replayed_bytes"`
	ChainBytes int64  `json:"chain_bytes"`
	LogOpen    string `json:"open_log"`
	ChainLoad  string `json:"open_chain"`
	Replay     string `json:"open_replay"`
}

// openReport is what one open reported: the log bytes it replayed, the
// chain's bytes it loaded, and how long the log's open, the chain's load
// and the replay took.
type openReport struct {
	replayedBytes, chainBytes  int64
	logOpen, chainLoad, replay time.Duration
}

func (l openLine) report() *openReport {
	parse := func(s string) time.Duration { d, _ := time.ParseDuration(s); return d }
	return &openReport{replayedBytes: l.Replayed, chainBytes: l.ChainBytes,
		logOpen: parse(l.LogOpen), chainLoad: parse(l.ChainLoad), replay: parse(l.Replay)}
}

// crashPhases is the opens' parts by tenth of the run, and the time to
// healthy fitted as a fixed part plus a part per GB of chain loaded.
func crashPhases(o CrashloopOptions, starts []crashStart) *Result {
	r := &Result{Case: "open-phases", Concurrency: o.Clients, Ops: uint64(len(starts)), NoFloorRatio: true}
	var opened []crashStart
	for _, s := range starts {
		if s.opened != nil {
			opened = append(opened, s)
		}
	}
	if len(opened) < 2 {
		r.Set("note", "fewer than two opens reported their phases")
		return r
	}
	medianOf := func(f func(crashStart) float64) func([]crashStart) float64 {
		return func(ss []crashStart) float64 {
			v := make([]float64, len(ss))
			for i, s := range ss {
				v[i] = f(s)
			}
			return median(v)
		}
	}
	chainGB := func(s crashStart) float64 { return float64(s.opened.chainBytes) / (1 << 30) }
	r.Set("chain_mb_by_tenth", tenths(opened, medianOf(func(s crashStart) float64 { return mb(s.opened.chainBytes) }), 0))
	r.Set("chain_load_ms_by_tenth", tenths(opened, medianOf(func(s crashStart) float64 { return ms(s.opened.chainLoad) }), 0))
	r.Set("replay_ms_by_tenth", tenths(opened, medianOf(func(s crashStart) float64 { return ms(s.opened.replay) }), 0))
	r.Set("log_open_ms_by_tenth", tenths(opened, medianOf(func(s crashStart) float64 { return ms(s.opened.logOpen) }), 0))
	r.Set("rest_ms_by_tenth", tenths(opened, medianOf(func(s crashStart) float64 {
		return ms(s.healthy - s.opened.logOpen - s.opened.chainLoad - s.opened.replay)
	}), 0))
	xs, ys := make([]float64, len(opened)), make([]float64, len(opened))
	for i, s := range opened {
		xs[i], ys[i] = chainGB(s), ms(s.healthy)
	}
	a, b := fitLine(xs, ys)
	r.Set("fit_fixed_ms", round(a, 0))
	r.Set("fit_ms_per_chain_gb", round(b, 0))
	// The aim, last ≤ ratio × first + slack, with both medians a + b × chain,
	// holds when b ≤ ((ratio-1) a + slack) / (chain_last - ratio × chain_first).
	m := min(crashMedianOf, len(opened))
	cFirst, cLast := medianOf(chainGB)(opened[:m]), medianOf(chainGB)(opened[len(opened)-m:])
	if d := cLast - crashBoundRatio*cFirst; d > 0 {
		r.Set("aim_needs_ms_per_chain_gb", round(((crashBoundRatio-1)*a+ms(crashBoundSlack))/d, 0))
	}
	return r
}

// fitLine is the least-squares line y = a + b·x.
func fitLine(xs, ys []float64) (a, b float64) {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i, x := range xs {
		sx, sy, sxx, sxy = sx+x, sy+ys[i], sxx+x*x, sxy+x*ys[i]
	}
	if den := n*sxx - sx*sx; den != 0 {
		b = (n*sxy - sx*sy) / den
	}
	return (sy - b*sx) / n, b
}
