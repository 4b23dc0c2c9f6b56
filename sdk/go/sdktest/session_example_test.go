package sdktest_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/internal/testsupport"
	idem "github.com/idemdb/idem/sdk/go"
)

// exampleSession is doc.go's session snippet, between markers named as
// the README example's are (TestDoc_SessionSnippetIsTheExample):
// a step on two tables, a read of its own write, the commit.
func exampleSession(base string, out io.Writer) {
	ctx := context.Background()
	c, err := idem.New(base, idem.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for _, tb := range []string{"orders", "stock"} {
		if _, err := c.CreateTable(ctx, tb, 0); err != nil {
			log.Fatal(err)
		}
	}
	// README:begin
	sess, err := c.BeginSession(ctx, &idem.SessionOptions{TTL: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	step := map[string]any{
		"orders": map[string]any{"inserts": []any{map[string]any{"id": "o-2", "doc": map[string]any{"total": 5}}}},
		"stock":  map[string]any{"transforms": []any{map[string]any{"id": "w", "ops": []any{map[string]any{"op": "$inc", "path": "n", "value": -1}}, "upsert": true}}},
	}
	if _, err := sess.StageTables(ctx, step); err != nil {
		log.Fatal(err) // a refused step leaves the session as it was
	}
	doc, _ := sess.Get(ctx, "orders", "o-2") // its own write: nobody else sees it before the commit
	fmt.Fprintln(out, string(doc))           // {"total":5}
	res, err := sess.Commit(ctx, nil)
	if err != nil {
		log.Fatal(err) // ErrTransactionConflict: a document it saw changed; nothing applied
	}
	fmt.Fprintln(out, res.Inserted, res.Transformed) // 1 1
	// README:end
}

func TestExample_SessionRunsAgainstIdemd(t *testing.T) {
	s := startServer(t)
	var out strings.Builder
	exampleSession("http://"+s.addr, &out)
	if want := "{\"total\":5}\n1 1\n"; out.String() != want {
		t.Fatalf("the session example printed %q, want %q", out.String(), want)
	}
}

// TestDoc_SessionSnippetIsTheExample: the SDK package comment's code block is,
// line for line, exampleSession's body between its markers.
func TestDoc_SessionSnippetIsTheExample(t *testing.T) {
	src, err := os.ReadFile("../doc.go") // the SDK package's comment
	if err != nil {
		t.Fatal(err)
	}
	var snippet strings.Builder
	for _, line := range strings.SplitAfter(string(src), "\n") {
		if code, ok := strings.CutPrefix(line, "//\t"); ok {
			snippet.WriteString(code)
		}
	}
	if want := testsupport.MarkedBody(t, "session_example_test.go"); snippet.String() != want {
		t.Fatalf("doc.go's snippet:\n%s\nexample body:\n%s", snippet.String(), want)
	}
}
