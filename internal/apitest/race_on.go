//go:build race

package apitest

// raceEnabled: this binary runs under the race detector; BuildIdemd builds
// the idemd child the same way.
const raceEnabled = true
