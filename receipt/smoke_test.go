package receipt_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
)

func TestSmoke_KeyedCommitReplayMismatch(t *testing.T) {
	ctx := context.Background()
	db, err := engine.Open(t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	clock := lease.NewSim(time.Unix(1_700_000_000, 0))
	svc, err := receipt.Open(ctx, db, receipt.Options{Clock: clock, MaintainInterval: -1, CleanInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	batch := func(s string) *table.Batch {
		b, err := table.DecodeBatch([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	req := receipt.Request{Principal: "p", Table: "t", Key: "k1", Batch: batch(`{"inserts":[{"id":"a","doc":{"x":1}}]}`)}
	ans, err := svc.Execute(ctx, req)
	if err != nil || ans.Status != 404 || ans.Code != "table_not_found" || !ans.Terminal {
		t.Fatalf("missing table: %+v %v", ans, err)
	}
	if _, _, err := svc.Tables().Create(ctx, "p", "t", 0); err != nil {
		t.Fatal(err)
	}
	again, err := svc.Execute(ctx, req)
	if err != nil || !again.Replayed || again.Envelope.Message != ans.Envelope.Message || again.Status != 404 {
		t.Fatalf("replay after create: %+v %v", again, err)
	}
	req2 := receipt.Request{Principal: "p", Table: "t", Key: "k2", Batch: batch(`{"inserts":[{"id":"a","doc":{"x":1}}],"transforms":[{"id":"c","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`)}
	ans, err = svc.Execute(ctx, req2)
	if err != nil || ans.Status != 201 || string(ans.Result) != `{"inserted":1,"deleted":0,"transformed":1}` {
		t.Fatalf("commit: %+v %s %v", ans, ans.Result, err)
	}
	ans2, err := svc.Execute(ctx, req2)
	if err != nil || !ans2.Replayed || string(ans2.Result) != string(ans.Result) {
		t.Fatalf("replay: %+v %v", ans2, err)
	}
	doc, err := svc.Tables().Get(ctx, "p", "t", "c")
	if err != nil || string(doc) != `{"n":1}` {
		t.Fatalf("doc c = %s %v", doc, err)
	}
	req2.Batch = batch(`{"inserts":[{"id":"zzz","doc":{"x":1}}]}`)
	mm, err := svc.Execute(ctx, req2)
	if err != nil || mm.Status != 422 {
		t.Fatalf("mismatch: %+v %v", mm, err)
	}
	if svc.Active().Len() != 0 {
		t.Fatalf("active set has %d entries after terminal receipts", svc.Active().Len())
	}
	// A receipt made terminal in the write that committed it keeps no 2PC
	// record: maintenance has no decision to release.
	if txns, err := db.Scan(ctx, []byte(store.NSTxn), store.PrefixEnd([]byte(store.NSTxn)), 1); err != nil || len(txns) != 0 {
		t.Fatalf("2PC records retained after a keyed commit: %v %v", txns, err)
	}
	ms, err := svc.MaintainOnce(ctx)
	if err != nil || ms.Released != 0 {
		t.Fatalf("maintain: %+v %v", ms, err)
	}
	clock.Advance(25 * time.Hour)
	n, err := svc.CleanOnce(ctx)
	if err != nil || n != 2 {
		t.Fatalf("clean: %d %v", n, err)
	}
	// The key is spent: its tombstone refuses it, whatever the request.
	req2.Batch = batch(`{"transforms":[{"id":"c","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`)
	ans, err = svc.Execute(ctx, req2)
	if err != nil || ans.Status != 409 || ans.Code != code.KeyExpired || ans.Original == nil || ans.Original.TxnID != receipt.Bind("p", "t", "k2") {
		t.Fatalf("re-use after retention: %+v %v", ans, err)
	}
}
