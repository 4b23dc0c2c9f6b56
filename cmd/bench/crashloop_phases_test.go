package main

import (
	"math"
	"testing"
	"time"
)

// fitLine recovers a line's intercept and slope from points on it, and
// crashPhases reads the chain's load off the opens it is given.
func TestCrashPhases_FitsTheFixedPartAndThePartPerGB(t *testing.T) {
	a, b := fitLine([]float64{0, 1, 2, 4}, []float64{300, 1300, 2300, 4300})
	if math.Abs(a-300) > 1e-9 || math.Abs(b-1000) > 1e-9 {
		t.Fatalf("fitLine = %v + %v x, want 300 + 1000 x", a, b)
	}
	var starts []crashStart
	for i := range 20 {
		chain := int64(i) << 30 / 10 // 0 to 1.9 GB
		healthy := 300*time.Millisecond + time.Duration(chain)*time.Second/(1<<30)
		starts = append(starts, crashStart{kill: i + 1, healthy: healthy,
			opened: &openReport{chainBytes: chain, chainLoad: healthy - 300*time.Millisecond, replay: 100 * time.Millisecond}})
	}
	r := crashPhases(CrashloopOptions{Clients: 1}, starts)
	if r.Extra["fit_fixed_ms"] != 300.0 || r.Extra["fit_ms_per_chain_gb"] != 1000.0 {
		t.Fatalf("fit %v + %v ms/GB, want 300 + 1000", r.Extra["fit_fixed_ms"], r.Extra["fit_ms_per_chain_gb"])
	}
	// First ten kills' median chain 0.45 GB, last ten's 1.45 GB: the aim
	// needs b ≤ (0.5 × 300 + 500) / (1.45 − 1.5 × 0.45) = 839 ms/GB.
	if got := r.Extra["aim_needs_ms_per_chain_gb"]; got != 839.0 {
		t.Fatalf("aim_needs_ms_per_chain_gb = %v, want 839", got)
	}
}
