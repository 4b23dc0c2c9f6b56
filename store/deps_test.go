package store

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
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

// capabilityTypes are the interfaces a store declares in Capabilities.
var capabilityTypes = []string{"Chainer", "MultiGetter", "HotScanner", "LatestReader", "SpaceReporter"}

// TestCapabilities_AreNeverFoundByTypeAssertion: no Go file of the
// repository asks a value whether it is a Chainer (MultiGetter, …): a
// wrapper that embeds the Store interface would answer for its inner
// store, around itself. Capabilities() is the one way to ask.
func TestCapabilities_AreNeverFoundByTypeAssertion(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ta, ok := n.(*ast.TypeAssertExpr); ok && ta.Type != nil {
				if name := typeName(ta.Type, f.Name.Name); slices.Contains(capabilityTypes, name) {
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s: a type assertion to %s: ask Capabilities()", rel, name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("only %d Go files walked: the check is vacuous", files)
	}
}

// typeName is the name of a store type e refers to (store.X, or X inside
// package store), else "".
func typeName(e ast.Expr, pkg string) string {
	switch x := e.(type) {
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok && id.Name == "store" {
			return x.Sel.Name
		}
	case *ast.Ident:
		if pkg == "store" {
			return x.Name
		}
	}
	return ""
}
