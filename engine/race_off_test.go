//go:build !race

package engine

// raceEnabled reports whether this test binary runs under the race
// detector (race_on_test.go).
const raceEnabled = false
