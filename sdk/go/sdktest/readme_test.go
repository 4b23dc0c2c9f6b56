package sdktest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemdb/idem/internal/testsupport"
)

// TestREADME_GoProgramRuns: the README's Go SDK block is a whole program
// that, built against this SDK and pointed at a real idemd (only its
// address substituted), prints what the README's comments say.
// (.ci/sdk-install runs it again from a module outside the repository.)
func TestREADME_GoProgramRuns(t *testing.T) {
	program := testsupport.ReadmeBlock(t, "../../../README.md", "## SDKs", "go")
	s := startServer(t)
	// A directory of this module, so that the workspace resolves the SDK.
	dir, err := os.MkdirTemp(".", "readme-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	src := strings.Replace(program, "http://127.0.0.1:8420", "http://"+s.addr, 1)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "run", "./"+dir).CombinedOutput()
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, out)
	}
	if want := "1 false\ntrue true\n422 not_applied\n"; string(out) != want {
		t.Fatalf("the README's program printed %q, want %q", out, want)
	}
}
