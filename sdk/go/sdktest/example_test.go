package sdktest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"
	"testing"

	idem "github.com/idemdb/idem/sdk/go"
)

// exampleClient is the SDK at work, as in the README's program: a table, a keyed batch, its
// replay, and a typed error. It runs against a real idemd
// (TestExample_RunsAgainstIdemd), whose address it takes.
func exampleClient(base string, out io.Writer) {
	ctx := context.Background()
	c, err := idem.New(base, idem.Options{}) // Options{Token: "…"} with a tokens file
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.CreateTable(ctx, "orders", 0); err != nil {
		log.Fatal(err)
	}
	batch := map[string]any{"inserts": []any{map[string]any{"id": "o-1", "doc": map[string]any{"total": 12}}}}
	res, err := c.Batch(ctx, "orders", batch, &idem.BatchOptions{Key: "order-1"})
	if err != nil {
		log.Fatal(err) // an *idem.Error, after the retries the SDK makes itself
	}
	fmt.Fprintln(out, res.Inserted, res.Replayed) // 1 false
	again, _ := c.Batch(ctx, "orders", batch, &idem.BatchOptions{Key: "order-1"})
	fmt.Fprintln(out, again.Replayed, again.TransactionID == res.TransactionID) // true true
	other := map[string]any{"deletes": []any{"o-1"}}
	_, err = c.Batch(ctx, "orders", other, &idem.BatchOptions{Key: "order-1"})
	var e *idem.Error
	if errors.Is(err, idem.ErrKeyMismatch) && errors.As(err, &e) {
		fmt.Fprintln(out, e.Status, e.Outcome) // 422 not_applied
	}
}

func TestExample_RunsAgainstIdemd(t *testing.T) {
	s := startServer(t)
	var out strings.Builder
	exampleClient("http://"+s.addr, &out)
	if want := "1 false\ntrue true\n422 not_applied\n"; out.String() != want {
		t.Fatalf("the README's example printed %q, want %q", out.String(), want)
	}
}
