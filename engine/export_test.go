package engine

import (
	"maps"
	"slices"
	"testing"

	"github.com/idemdb/idem/internal/testsupport"
)

// The offline checker for the tests here that hold the dirs they make to
// it (a backup, a format fixture, a lost merged base). It lives in package
// engine/check, which imports this package, so these internal tests
// cannot import it: the external test package sets CheckDir
// (checkhook_test.go), in the same test binary.

// CheckProblem is one finding of the checker: its kind ("damage",
// "torn-tail", "note"), the file it names and what it says.
type CheckProblem struct{ Kind, File, Detail string }

// CheckDir runs the checker over the stopped data dir dir: whether the
// logical load ran (an open accepts the dir), and every problem found.
var CheckDir func(dir string) (loaded bool, problems []CheckProblem, err error)

// checkDirT checks dir and asserts that nothing in it changed.
func checkDirT(t *testing.T, dir string) (loaded bool, problems []CheckProblem) {
	t.Helper()
	if CheckDir == nil {
		t.Fatal("CheckDir is not set: checkhook_test.go sets it")
	}
	before := testsupport.DirHashes(t, dir)
	loaded, problems, err := CheckDir(dir)
	if err != nil {
		t.Fatalf("check %s: %v", dir, err)
	}
	if after := testsupport.DirHashes(t, dir); !maps.Equal(before, after) {
		t.Fatalf("check changed the dir:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
	return loaded, problems
}

// damageOf is the problems of kind damage.
func damageOf(problems []CheckProblem) []CheckProblem {
	var out []CheckProblem
	for _, p := range problems {
		if p.Kind == "damage" {
			out = append(out, p)
		}
	}
	return out
}
