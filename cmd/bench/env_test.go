package main

import (
	"context"
	"io"
	"os"
	"testing"
)

// TestDataDir_KeepDirsLeavesTheCasesDirectory: a case's cleanup removes
// its data directory, unless -keep-dirs asked to keep it for a later open
// by hand.
func TestDataDir_KeepDirsLeavesTheCasesDirectory(t *testing.T) {
	for _, keep := range []bool{false, true} {
		run := newRunState(Options{KeepDirs: keep}, t.TempDir(), io.Discard, io.Discard)
		dir, cleanup, err := newEnv(context.Background(), run, "recovery").DataDir("restart-growing")
		if err != nil {
			t.Fatal(err)
		}
		cleanup()
		if _, err := os.Stat(dir); (err == nil) != keep {
			t.Errorf("-keep-dirs=%v: after cleanup, stat %s: %v", keep, dir, err)
		}
	}
}
