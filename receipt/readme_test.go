package receipt_test

import (
	"os"
	"strings"
	"testing"
)

// TestREADME_LibrarySnippetIsTheExample: the README's "Using it as a
// library" block is, line for line, the body of Example between its
// README markers, so the snippet compiles and runs as written.
func TestREADME_LibrarySnippetIsTheExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "## Using it as a library")
	if !ok {
		t.Fatal("README has no library section")
	}
	_, block, ok := strings.Cut(after, "```go\n")
	if !ok {
		t.Fatal("README library section has no go block")
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
		t.Fatalf("README snippet:\n%s\nExample body:\n%s", snippet, want)
	}
}
