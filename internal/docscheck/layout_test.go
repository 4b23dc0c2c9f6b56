package docscheck

import (
	"path"
	"sort"
	"strings"
	"testing"
)

// layoutHeading starts the README's table of packages; the next "## "
// heading ends it.
const layoutHeading = "\n## Layout\n"

// TestREADME_LayoutNamesEveryPackage: every directory of the repository
// that holds a Go package (nested modules included) is named in the
// README's layout table, as `dir` or `dir/`, so a new package cannot
// arrive unmapped.
func TestREADME_LayoutNamesEveryPackage(t *testing.T) {
	root := repoRoot(t)
	readme := readFile(t, root, "README.md")
	_, layout, ok := strings.Cut(readme, layoutHeading)
	if !ok {
		t.Fatalf("README.md has no %q section", strings.TrimSpace(layoutHeading))
	}
	if end := strings.Index(layout, "\n## "); end >= 0 {
		layout = layout[:end]
	}
	dirs := goPackageDirs(t, root)
	if len(dirs) < 20 {
		t.Fatalf("only %d package directories found: the walk is broken", len(dirs))
	}
	var missing []string
	for _, d := range dirs {
		if !strings.Contains(layout, "`"+d+"`") && !strings.Contains(layout, "`"+d+"/`") {
			missing = append(missing, d)
		}
	}
	if len(missing) > 0 {
		t.Errorf("README.md's layout table does not name %d package(s): %s", len(missing), strings.Join(missing, ", "))
	}
}

// goPackageDirs lists, relative to root, the directories below it that
// hold a Go file, sorted (the root's own package is the module, not a row).
func goPackageDirs(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	walkFiles(t, root, []string{".go"}, func(rel string) {
		if d := path.Dir(rel); d != "." {
			seen[d] = true
		}
	})
	dirs := make([]string, 0, len(seen))
	for d := range seen {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	return dirs
}
