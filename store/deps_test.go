package store

import (
	"go/build"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/idemdb/idem"

// forbidden are the local engine's packages: a store other than the local
// one, and the contract itself, link none of them (issue 36, part 1).
var forbidden = []string{"engine", "wal", "vfs", "index", "internal/tidwall", "internal/btree"}

// TestDeps_TheContractAndTheOtherStoresLinkNoneOfTheEngines: the idem
// packages each of store, store/memstore, store/storetest and store/etcd
// links (non-test files, the default build), walked through the import
// graph, hold nothing of the local engine; store itself links no idem
// package at all.
func TestDeps_TheContractAndTheOtherStoresLinkNoneOfTheEngines(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"store", "store/memstore", "store/storetest", "store/etcd"} {
		deps := idemDeps(t, root, pkg)
		t.Logf("%s links %d idem packages: %s", pkg, len(deps), strings.Join(deps, " "))
		for _, d := range deps {
			if slices.Contains(forbidden, d) {
				t.Errorf("%s links %s", pkg, d)
			}
		}
		if pkg == "store" && len(deps) > 0 {
			t.Errorf("the contract links %v: it must stand alone", deps)
		}
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
	deps := make([]string, 0, len(seen))
	for d := range seen {
		deps = append(deps, d)
	}
	slices.Sort(deps)
	return deps
}
