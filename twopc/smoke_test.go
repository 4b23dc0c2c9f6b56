package twopc_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

type env struct {
	db     *engine.DB
	tables *table.Tables
	coord  *twopc.Coordinator
}

func newEnv(t *testing.T, opts twopc.Options) *env {
	t.Helper()
	db, err := engine.Open(t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tables, coord := table.NewWithCoordinator(db, opts)
	if _, _, err := tables.Create(context.Background(), tenant, "t", 4); err != nil {
		t.Fatal(err)
	}
	return &env{db, tables, coord}
}

func participants(p *table.Plan) []twopc.Participant {
	out := make([]twopc.Participant, len(p.Shards))
	for i, s := range p.Shards {
		out[i] = s
	}
	return out
}

func TestSmoke_BeginDecideRead(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, twopc.Options{})
	b, err := table.DecodeBatch([]byte(`{"inserts":[{"id":"a","doc":{"n":1}},{"id":"b","doc":{"n":2}},{"id":"c","doc":{"n":3}}],"transforms":[{"id":"d","ops":[{"op":"$inc","path":"n","value":5}],"upsert":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := e.tables.Preflight(ctx, tenant, "t", b)
	if err != nil {
		t.Fatal(err)
	}
	txn := twopc.Txn{ID: "tx1", Participants: participants(plan), Result: func() ([]byte, error) { return json.Marshal(plan.Result()) }}
	res, err := e.coord.Begin(ctx, txn, nil)
	if err != nil || !res.Prepared {
		t.Fatalf("begin: %+v %v", res, err)
	}
	// Uncommitted intents are invisible.
	if _, err := e.tables.Get(ctx, tenant, "t", "a"); err == nil {
		t.Fatal("read saw an uncommitted insert")
	}
	o, won, err := e.coord.DecideOrLearn(ctx, "tx1", txn.Participants, twopc.Committed{Result: []byte("r")}, nil)
	if err != nil || !won {
		t.Fatalf("decide: %v %v %v", o, won, err)
	}
	doc, err := e.tables.Get(ctx, tenant, "t", "d")
	if err != nil || string(doc) != `{"n":5}` {
		t.Fatalf("d = %s, %v", doc, err)
	}
	// Re-begin returns the decision and does not re-apply.
	res, err = e.coord.Begin(ctx, txn, nil)
	if err != nil || res.Decided == nil {
		t.Fatalf("re-begin: %+v %v", res, err)
	}
	doc, _ = e.tables.Get(ctx, tenant, "t", "d")
	if string(doc) != `{"n":5}` {
		t.Fatalf("d after re-begin = %s", doc)
	}
}
