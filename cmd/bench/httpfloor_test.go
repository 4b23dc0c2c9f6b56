package main

import "testing"

// HTTP keyed@32's CPU aim is judged on what it takes beyond the library's
// keyed@32 and the http-floor@32 of the same run, met up to the bound and
// missed past it, and left out when a figure is missing.
func TestHTTPKeyedCPUAim_JudgesTheCPUBeyondLibraryAndFloor(t *testing.T) {
	for _, tc := range []struct {
		http, lib, floor float64
		met              bool
	}{
		{http: 150, lib: 80, floor: 40, met: false}, // 30 µs beyond
		{http: 135, lib: 80, floor: 40, met: true},  // exactly on the bound
		{http: 100, lib: 80, floor: 40, met: true},  // less than the two
	} {
		r := resultWithCPU(tc.http)
		httpKeyedCPUAim(r, resultWithCPU(tc.lib), resultWithCPU(tc.floor))
		if len(r.Targets) != 1 || r.Targets[0].Met != tc.met {
			t.Errorf("%+v: targets %+v, want one, met=%v", tc, r.Targets, tc.met)
			continue
		}
		if got, want := r.Extra["cpu_over_library_and_floor_us"], round(tc.http-tc.lib-tc.floor, 1); got != want {
			t.Errorf("%+v: cpu_over_library_and_floor_us %v, want %v", tc, got, want)
		}
	}
	r := resultWithCPU(150)
	httpKeyedCPUAim(r, resultWithCPU(80), nil)
	if len(r.Targets) != 0 || r.Extra["cpu_over_library_and_floor_us"] != nil {
		t.Errorf("without an http-floor: %+v %v, want no aim", r.Targets, r.Extra)
	}
}

// The POST floor's figure is HTTP keyed's CPU beyond the library's and
// the http-post-floor's, set beside the aim, judging nothing; absent
// without a POST floor.
func TestHTTPKeyedOverPostFloor_SetsTheFigureWithoutATarget(t *testing.T) {
	r := resultWithCPU(150)
	httpKeyedOverPostFloor(r, resultWithCPU(80), resultWithCPU(55))
	if got := r.Extra["cpu_over_library_and_post_floor_us"]; got != 15.0 {
		t.Errorf("cpu_over_library_and_post_floor_us %v, want 15", got)
	}
	if len(r.Targets) != 0 {
		t.Errorf("targets %+v, want none", r.Targets)
	}
	r = resultWithCPU(150)
	httpKeyedOverPostFloor(r, resultWithCPU(80), nil)
	if v, ok := r.Extra["cpu_over_library_and_post_floor_us"]; ok {
		t.Errorf("without a POST floor: %v, want no figure", v)
	}
}

// resultWithCPU is a row whose only figure is its CPU per op.
func resultWithCPU(us float64) *Result {
	r := &Result{}
	r.Set("cpu_us_per_op", us)
	return r
}
