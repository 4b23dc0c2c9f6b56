package fault

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCatalog_NamesAreUsedAndUnique proves the catalog and the code agree:
// every cataloged constant is referenced by production code outside this
// package, no name is listed twice, and no production code evaluates a
// failpoint by literal name.
func TestCatalog_NamesAreUsedAndUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Catalog {
		if seen[p.Name] {
			t.Errorf("failpoint %q listed twice", p.Name)
		}
		seen[p.Name] = true
		if p.Where == "" || p.Simulates == "" || p.Layer == "" {
			t.Errorf("failpoint %q is not documented", p.Name)
		}
	}
	consts := map[string]string{} // constant identifier -> name
	src, err := os.ReadFile("catalog.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s+(\w+)\s+= "([^"]+)"`).FindAllStringSubmatch(string(src), -1) {
		consts[m[1]] = m[2]
	}
	for id, name := range consts {
		if !seen[name] {
			t.Errorf("constant %s = %q is not in Catalog", id, name)
		}
	}
	used := map[string]bool{}
	literal := regexp.MustCompile(`fault\.(Inject|Eval)\("`)
	err = filepath.Walk("..", func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() && (info.Name() == ".git" || info.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == "." {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if literal.Match(b) {
			t.Errorf("%s evaluates a failpoint by literal name; use a catalog constant", path)
		}
		for id := range consts {
			if strings.Contains(string(b), "fault."+id) {
				used[id] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id := range consts {
		if !used[id] {
			t.Errorf("failpoint constant %s is never used by production code", id)
		}
	}
}
