package testsupport

import (
	"os"
	"strings"
	"testing"
)

// ReadmeBlock returns the first ```lang block after the heading section
// of the README at path.
func ReadmeBlock(t testing.TB, path, section, lang string) string {
	t.Helper()
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), section)
	if !ok {
		t.Fatalf("%s has no section %q", path, section)
	}
	_, block, ok := strings.Cut(after, "```"+lang+"\n")
	if !ok {
		t.Fatalf("%s's section %q has no %s block", path, section, lang)
	}
	snippet, _, _ := strings.Cut(block, "```")
	return snippet
}

// MarkedBody returns the lines of the Go file at path between its
// "// README:begin" and "// README:end" markers, one tab of indentation
// removed: what a README block must be, line for line, for the snippet to
// compile and run as written.
func MarkedBody(t testing.TB, path string) string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "// README:begin\n")
	if !ok {
		t.Fatalf("%s has no README:begin marker", path)
	}
	body, _, _ = strings.Cut(body, "\t// README:end")
	var out strings.Builder
	for _, line := range strings.SplitAfter(body, "\n") {
		out.WriteString(strings.TrimPrefix(line, "\t"))
	}
	return out.String()
}
