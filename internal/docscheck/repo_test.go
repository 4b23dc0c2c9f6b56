package docscheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the repository root: the nearest directory above this
// package's that holds go.work.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's directory")
		}
		dir = parent
	}
}

// skipDir says which directories hold no files of ours to check: VCS data,
// JavaScript dependencies, build output and test fixtures.
func skipDir(name string) bool {
	switch name {
	case ".git", "node_modules", "testdata", "dist", "bin", "failures", "__pycache__":
		return true
	}
	return strings.HasPrefix(name, ".")
}

// walkFiles calls fn for every regular file under root whose name ends in
// one of exts, with its path relative to root.
func walkFiles(t *testing.T, root string, exts []string, fn func(rel string)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		for _, ext := range exts {
			if strings.HasSuffix(path, ext) {
				rel, _ := filepath.Rel(root, path)
				fn(filepath.ToSlash(rel))
				return nil
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// readFile reads a file under root.
func readFile(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
