package idem_test

import (
	"testing"

	"github.com/idemdb/idem/internal/testsupport"
)

// TestREADME_GoSnippetIsTheExample: the README's Go SDK block is, line for
// line, exampleClient's body between its README markers, so the snippet
// compiles and runs (TestExample_RunsAgainstIdemd) as written.
func TestREADME_GoSnippetIsTheExample(t *testing.T) {
	snippet := testsupport.ReadmeBlock(t, "../../README.md", "## SDKs", "go")
	if want := testsupport.MarkedBody(t, "example_test.go"); snippet != want {
		t.Fatalf("README snippet:\n%s\nexample body:\n%s", snippet, want)
	}
}
