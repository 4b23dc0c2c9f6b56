package receipt_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/table"
)

// Example is the README's library snippet (TestREADME_LibrarySnippetIsTheExample
// holds the two together): one keyed batch, then its retry, which replays
// the stored answer byte for byte.
func Example() {
	dir, _ := os.MkdirTemp("", "idem-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	// README:begin
	db, err := engine.Open(dir, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	svc, err := receipt.Open(ctx, db, receipt.Options{Node: "node-0"})
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close()
	if _, _, err := svc.Tables().Create(ctx, "alice", "orders", 0); err != nil {
		log.Fatal(err)
	}
	batch, err := table.DecodeBatch([]byte(`{"inserts":[{"id":"o-1","doc":{"total":12}}]}`))
	if err != nil {
		log.Fatal(err) // a *code.Error invalid_request
	}
	req := receipt.Request{Principal: "alice", Table: "orders", Key: "order-1", Batch: batch}
	ans, err := svc.Execute(ctx, req)
	if err != nil {
		log.Fatal(err) // the store failed; every expected outcome is an Answer
	}
	// ans.Envelope: status, outcome, code, message, retryable, retry_with, txn id, result
	fmt.Println(ans.Status, ans.Outcome, string(ans.Result))
	again, _ := svc.Execute(ctx, req) // a retry: the stored answer, not a second insert
	fmt.Println(again.Replayed, bytes.Equal(again.Result, ans.Result), again.TxnID == ans.TxnID)
	// README:end
	// Output:
	// 201 committed {"inserted":1,"deleted":0,"transformed":0}
	// true true true
}
