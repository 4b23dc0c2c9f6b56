package check

import (
	"go/build"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/idemdb/idem"

// above are the packages over the engine: the checker of a data dir links
// none of them, only the engine and what the engine links.
var above = []string{"receipt", "table", "twopc", "lease", "api", "harness", "store/etcd", "store/memstore"}

// TestDeps_TheCheckerSitsAboveTheEngineAndBelowEverythingElse: engine/check
// (non-test files, the default build) links engine and nothing above it,
// and engine links no checker: engine is the local database only (issue
// 36, part 1).
func TestDeps_TheCheckerSitsAboveTheEngineAndBelowEverythingElse(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	deps := idemDeps(t, root, "engine/check")
	t.Logf("engine/check links %d idem packages: %s", len(deps), strings.Join(deps, " "))
	if !slices.Contains(deps, "engine") {
		t.Errorf("engine/check does not link engine: %v", deps)
	}
	for _, d := range deps {
		for _, a := range above {
			if d == a || strings.HasPrefix(d, a+"/") {
				t.Errorf("engine/check links %s", d)
			}
		}
	}
	if deps := idemDeps(t, root, "engine"); slices.Contains(deps, "engine/check") {
		t.Errorf("engine links engine/check: %v", deps)
	}
}

// idemDeps is every package of this module that pkg (a directory relative
// to root) imports, directly or not, sorted.
func idemDeps(t *testing.T, root, pkg string) []string {
	t.Helper()
	seen := map[string]bool{}
	var walk func(dir string)
	walk = func(dir string) {
		p, err := build.ImportDir(filepath.Join(root, filepath.FromSlash(dir)), 0)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, imp := range p.Imports {
			rel, ok := strings.CutPrefix(imp, module+"/")
			if !ok || seen[rel] {
				continue
			}
			seen[rel] = true
			walk(rel)
		}
	}
	walk(pkg)
	return slices.Sorted(maps.Keys(seen))
}
