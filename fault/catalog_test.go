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
	consts := constsIn(t, "catalog.go") // constant identifier -> name
	for id, name := range consts {
		if !seen[name] {
			t.Errorf("constant %s = %q is not in Catalog", id, name)
		}
	}
	used := map[string]bool{}
	literal := regexp.MustCompile(`fault\.(Inject|Eval|Planted)\("`)
	productionSources(t, func(path, src string) {
		if literal.MatchString(src) {
			t.Errorf("%s evaluates a failpoint by literal name; use a catalog constant", path)
		}
		for id := range consts {
			if strings.Contains(src, "fault."+id) {
				used[id] = true
			}
		}
	})
	for id := range consts {
		if !used[id] {
			t.Errorf("failpoint constant %s is never used by production code", id)
		}
	}
}

// TestCatalog_PlantedBugsOnlyThroughPlanted: a planted bug is never a
// failpoint. Its name is not in Catalog (so no fault schedule arms it) and
// production code asks for it only as fault.Planted(fault.BugX), which is
// the constant false outside -tags idem_selftest; Planted is given nothing
// else, and every planted name is used.
func TestCatalog_PlantedBugsOnlyThroughPlanted(t *testing.T) {
	bugs := constsIn(t, "planted.go")
	if len(bugs) == 0 {
		t.Fatal("no planted bug constants found in planted.go")
	}
	failpoints := constsIn(t, "catalog.go")
	for id, name := range bugs {
		if _, dup := failpoints[id]; dup {
			t.Errorf("%s is declared both as a failpoint and as a planted bug", id)
		}
		for _, p := range Catalog {
			if p.Name == name {
				t.Errorf("planted bug %s = %q is listed in Catalog", id, name)
			}
		}
	}
	planted := regexp.MustCompile(`fault\.Planted\(([^)]*)\)`)
	evaluated := regexp.MustCompile(`fault\.(?:Inject|Eval)\(fault\.(\w+)`)
	used := map[string]bool{}
	productionSources(t, func(path, src string) {
		for _, m := range planted.FindAllStringSubmatch(src, -1) {
			id, ok := strings.CutPrefix(m[1], "fault.")
			if _, bug := bugs[id]; !ok || !bug {
				t.Errorf("%s: fault.Planted(%s): want a planted bug constant from planted.go", path, m[1])
				continue
			}
			used[id] = true
		}
		for _, m := range evaluated.FindAllStringSubmatch(src, -1) {
			if _, bug := bugs[m[1]]; bug {
				t.Errorf("%s evaluates the planted bug %s as a failpoint; use fault.Planted", path, m[1])
			}
		}
	})
	for id := range bugs {
		switch {
		case !used[id] && !hooksPending[id]:
			t.Errorf("planted bug %s is never asked for with fault.Planted by production code", id)
		case used[id] && hooksPending[id]:
			t.Logf("planted bug %s has its hook now: drop it from hooksPending", id)
		}
	}
	for id := range hooksPending {
		if _, ok := bugs[id]; !ok {
			t.Errorf("hooksPending lists %s, which planted.go does not declare", id)
		}
	}
}

// constsIn returns the string constants declared one per line in file:
// identifier -> name.
func constsIn(t *testing.T, file string) map[string]string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(\w+)\s+= "([^"]+)"`).FindAllStringSubmatch(string(src), -1) {
		consts[m[1]] = m[2]
	}
	return consts
}

// productionSources calls fn with every non-test Go file of the module
// outside this package (whatever its build tags).
func productionSources(t *testing.T, fn func(path, src string)) {
	t.Helper()
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.Walk("..", func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			abs, err := filepath.Abs(path)
			if err != nil {
				return err
			}
			if abs == self || info.Name() == ".git" || info.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fn(path, string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
