//go:build race

package main

// raceEnabled: the test binary runs under the race detector; the idemd child
// is built the same way so that it reuses the already compiled packages.
const raceEnabled = true
