package receipt_test

import (
	"testing"

	"github.com/idemdb/idem/internal/testsupport"
)

// TestREADME_LibrarySnippetIsTheExample: the README's "Using it as a
// library" block is, line for line, the body of Example between its
// README markers, so the snippet compiles and runs as written.
func TestREADME_LibrarySnippetIsTheExample(t *testing.T) {
	snippet := testsupport.ReadmeBlock(t, "../README.md", "## Using it as a library", "go")
	if want := testsupport.MarkedBody(t, "example_test.go"); snippet != want {
		t.Fatalf("README snippet:\n%s\nExample body:\n%s", snippet, want)
	}
}
