//go:build race

package engine

// raceEnabled reports whether this test binary runs under the race
// detector: tests that repeat random draws (TestCrash_EveryFailpoint…'s
// rounds) draw fewer there, keeping every case.
const raceEnabled = true
