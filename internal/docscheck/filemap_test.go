package docscheck

import (
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// A file map is a package comment's indented block of lines that start
// with a file name (`//	create.go  publish a new receipt`): once a doc.go
// has one, it must name every file of its package.
var (
	fileMapLine = regexp.MustCompile(`(?m)^\t[\w.-]+\.go\b`)
	// A file named in prose or in the map: not preceded by a path, so
	// fault/catalog.go (another package's) does not count.
	fileMention = regexp.MustCompile(`(?:^|[^\w/.-])([\w-]+(?:\.[\w-]+)*\.go)\b`)
)

// TestDocGo_FileMapsNameEveryFileOfTheirPackage: every doc.go whose
// package comment maps its package's files names each non-test .go file
// of the package, and names none that does not exist.
func TestDocGo_FileMapsNameEveryFileOfTheirPackage(t *testing.T) {
	root := repoRoot(t)
	maps := 0
	walkFiles(t, root, []string{"/doc.go"}, func(rel string) {
		comment := packageComment(t, root, rel)
		if !fileMapLine.MatchString(comment) {
			return
		}
		maps++
		named := map[string]bool{}
		for _, m := range fileMention.FindAllStringSubmatch(comment, -1) {
			named[m[1]] = true
		}
		files := packageFiles(t, root, path.Dir(rel))
		var missing, stale []string
		for _, f := range files {
			if !named[f] && f != "doc.go" { // the map itself
				missing = append(missing, f)
			}
		}
		have := map[string]bool{}
		for _, f := range files {
			have[f] = true
		}
		for f := range named {
			if !have[f] && !strings.HasSuffix(f, "_test.go") {
				stale = append(stale, f)
			}
		}
		sort.Strings(stale)
		if len(missing) > 0 {
			t.Errorf("%s: the file map leaves out %d of %d files: %s", rel, len(missing), len(files), strings.Join(missing, ", "))
		}
		if len(stale) > 0 {
			t.Errorf("%s: the file map names files that do not exist: %s", rel, strings.Join(stale, ", "))
		}
	})
	if maps == 0 {
		t.Fatal("no doc.go with a file map found: the check is vacuous")
	}
}

// packageComment is the package comment of the Go file rel, as text.
func packageComment(t *testing.T, root, rel string) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, rel), nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	if f.Doc == nil {
		return ""
	}
	return f.Doc.Text()
}

// packageFiles lists the non-test .go files of directory dir, sorted.
func packageFiles(t *testing.T, root, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			files = append(files, n)
		}
	}
	return files
}
