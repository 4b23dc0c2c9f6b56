//go:build !race

package apitest

// RaceEnabled: this binary runs under the race detector; BuildIdemd builds
// the idemd child the same way.
const RaceEnabled = false
