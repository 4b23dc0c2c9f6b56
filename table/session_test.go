package table_test

import (
	"context"
	"testing"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

// TestSession_ReadIntentsHoldReadDocumentsUntilTheDecision: a session's
// commit stages an intent on a document it only read, so between Begin
// and the decision no writer can change it (the fast path is refused with
// transaction_conflict) and every reader still sees the committed
// document; resolving the read intent — commit or abort — leaves the
// document as it was and removes the intent.
func TestSession_ReadIntentsHoldReadDocumentsUntilTheDecision(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(map[bool]string{true: "commit", false: "abort"}[commit], func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, twopc.Options{})
			f.create(t, "t", 2)
			f.mustFast(t, "t", `{"inserts":[{"id":"r","doc":{"v":1}}]}`)
			st := &table.Staging{}
			if _, err := f.tables.SessionRead(ctx, tenant, st, "t", "r"); err != nil {
				t.Fatal(err)
			}
			if _, err := f.tables.SessionStage(ctx, tenant, st, "t", decode(t, `{"inserts":[{"id":"w","doc":{"v":2}}]}`)); err != nil {
				t.Fatal(err)
			}
			plan, err := f.tables.SessionPlan(ctx, tenant, st)
			if err != nil {
				t.Fatal(err)
			}
			txn := twopc.Txn{ID: "sess-txn", Participants: participantsOf(plan)}
			if res, err := f.coord.Begin(ctx, txn, nil); err != nil || !res.Prepared {
				t.Fatalf("begin: %+v %v", res, err)
			}
			_, err = f.fast(t, "t", `{"inserts":[{"id":"r","doc":{"v":9}}]}`)
			wantCode(t, err, code.TransactionConflict)
			if got := f.doc(t, "t", "r"); got != `{"v":1}` {
				t.Fatalf("the read document under its read intent reads %s", got)
			}
			var o twopc.Outcome = twopc.Committed{}
			if !commit {
				o = twopc.Aborted{Code: code.TransactionAborted, Message: "test"}
			}
			if err := f.coord.Decide(ctx, txn.ID, txn.Participants, o, nil); err != nil {
				t.Fatal(err)
			}
			if got := f.doc(t, "t", "r"); got != `{"v":1}` {
				t.Fatalf("after the decision the read document is %s", got)
			}
			wantW := map[bool]string{true: `{"v":2}`, false: ""}[commit]
			if got := f.doc(t, "t", "w"); got != wantW {
				t.Fatalf("the written document is %q, want %q", got, wantW)
			}
			if keys := keysUnder(t, f.db, []byte("intent/v1/")); len(keys) != 0 {
				t.Fatalf("intents left: %v", keys)
			}
			f.mustFast(t, "t", `{"inserts":[{"id":"r","doc":{"v":9}}]}`)
		})
	}
}

// TestSession_ChangedDocumentIsAFinalNo: a document the session saw that
// changed before the commit's Begin is the participant's final refusal —
// transaction_conflict naming it, with no re-prepare.
func TestSession_ChangedDocumentIsAFinalNo(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, twopc.Options{})
	f.create(t, "t", 1)
	f.mustFast(t, "t", `{"inserts":[{"id":"x","doc":{"n":1}}]}`)
	st := &table.Staging{}
	if _, err := f.tables.SessionStage(ctx, tenant, st, "t", decode(t, `{"transforms":[{"id":"x","ops":[{"op":"$inc","path":"n","value":1}]}]}`)); err != nil {
		t.Fatal(err)
	}
	f.mustFast(t, "t", `{"transforms":[{"id":"x","ops":[{"op":"$inc","path":"n","value":10}]}]}`)
	plan, err := f.tables.SessionPlan(ctx, tenant, st)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.coord.Begin(ctx, twopc.Txn{ID: "s1", Participants: participantsOf(plan)}, nil)
	if err != nil || res.Refused == nil || res.Refused.Code != code.TransactionConflict {
		t.Fatalf("begin: %+v %v, want a transaction_conflict refusal", res, err)
	}
	if got := f.doc(t, "t", "x"); got != `{"n":11}` {
		t.Fatalf("x = %s", got)
	}
}
