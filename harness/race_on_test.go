//go:build race

package harness

// raceEnabled reports whether this test binary runs under the race
// detector: TestFault then runs half its fixed seeds (raceHalf).
const raceEnabled = true
