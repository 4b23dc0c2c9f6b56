package idem_test

import (
	"os"
	"strings"
	"testing"
)

// TestREADME_GoSnippetIsTheExample: the README's Go SDK block is, line for
// line, exampleClient's body between its README markers, so the snippet
// compiles and runs (TestExample_RunsAgainstIdemd) as written.
func TestREADME_GoSnippetIsTheExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "## SDKs")
	if !ok {
		t.Fatal("README has no SDKs section")
	}
	_, block, ok := strings.Cut(after, "```go\n")
	if !ok {
		t.Fatal("README's SDKs section has no go block")
	}
	snippet, _, _ := strings.Cut(block, "```")
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(src), "// README:begin\n")
	body, _, _ = strings.Cut(body, "\t// README:end")
	var example []string
	for _, line := range strings.SplitAfter(body, "\n") {
		example = append(example, strings.TrimPrefix(line, "\t"))
	}
	if want := strings.Join(example, ""); snippet != want {
		t.Fatalf("README snippet:\n%s\nexample body:\n%s", snippet, want)
	}
}
