package api_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestKeyedHotDocument_EveryIncrementCommits is issue 37's flow: clients
// send keyed batches that each insert their own document and $inc one
// shared counter. Contention on the counter is waited out, never voted
// no: every batch commits, the counter equals the commits (each exactly
// once), and every answer replays byte for byte. Before the fix, 44–75 %
// of these batches got 409 transaction_conflict at 8–32 clients.
func TestKeyedHotDocument_EveryIncrementCommits(t *testing.T) {
	for _, clients := range []int{8, 32} {
		t.Run(fmt.Sprintf("clients=%d", clients), func(t *testing.T) {
			hotIncrements(t, clients, 6)
		})
	}
}

func hotIncrements(t *testing.T, clients, each int) {
	n := newNode(t, config{executorMax: 64, principalInflight: 64}) // quotas above the clients: only contention is tested
	n.createTable("t")
	body := func(c, i int) string {
		return fmt.Sprintf(`{"inserts":[{"id":"o-%d-%d","doc":{"c":%d}}],`+
			`"transforms":[{"id":"total","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`, c, i, c)
	}
	key := func(c, i int) string { return fmt.Sprintf("k-%d-%d", c, i) }
	first := make([][]byte, clients*each)
	status := make([]int, clients*each)
	errs := make([]error, clients*each)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range each {
				r, err := n.c.Try("POST", "/v1/tables/t/batch", body(c, i), "Idempotency-Key", key(c, i))
				if err != nil {
					errs[c*each+i] = err
					return
				}
				first[c*each+i], status[c*each+i] = r.Body, r.Status
			}
		})
	}
	wg.Wait()
	for j := range first {
		if errs[j] != nil {
			t.Fatal(errs[j])
		}
		if status[j] != 201 {
			t.Fatalf("batch %d: %d %s, want 201 (contention must be waited out)", j, status[j], first[j])
		}
	}
	if d := n.doc("t", "total"); d["n"] != float64(clients*each) {
		t.Fatalf("counter %v after %d commits", d["n"], clients*each)
	}
	for c := range clients {
		for i := range each {
			again := n.batch("t", key(c, i), body(c, i))
			if again.Status != 201 || !bytes.Equal(again.Body, first[c*each+i]) || again.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("replay of %s: %d %s, want 201 %s replayed", key(c, i), again.Status, again.Body, first[c*each+i])
			}
		}
	}
	if d := n.doc("t", "total"); d["n"] != float64(clients*each) {
		t.Fatalf("counter %v after replays of %d commits", d["n"], clients*each)
	}
}

// TestSessionCommitAborted_SaysNewSessionAndShowsItsOutcome (issue 37):
// a session whose commit aborted (a document it read changed) answers
// retry_with none and retry new_session — a commit under a new key would
// only replay it — and says so again on every replay, under any key; the
// session's view gives the commit's outcome, not just "committed"; and the
// commit's receipt, whose table is "", is reachable through the session.
func TestSessionCommitAborted_SaysNewSessionAndShowsItsOutcome(t *testing.T) {
	n := newNode(t, config{})
	n.createTable("t")
	if r := n.batch("t", "", `{"inserts":[{"id":"x","doc":{"n":1}}]}`); r.Status != 201 {
		t.Fatalf("insert: %d %s", r.Status, r.Body)
	}
	s := n.beginSession(n.c)
	base := "/v1/sessions/" + s.ID
	n.c.Do("GET", base+"/tables/t/docs/x", nil).JSON(t, 200, nil)
	n.c.Do("POST", base+"/batch", `{"table":"t","inserts":[{"id":"y","doc":{}}]}`).JSON(t, 200, nil)
	if r := n.batch("t", "", `{"transforms":[{"id":"x","ops":[{"op":"$inc","path":"n","value":1}]}]}`); r.Status != 201 {
		t.Fatalf("concurrent change: %d %s", r.Status, r.Body)
	}
	first := n.c.Do("POST", base+"/commit", nil, "Idempotency-Key", "c1")
	p := first.Problem(t, 409)
	if p.Code != "transaction_conflict" || p.Outcome != "aborted" || p.RetryWith != "none" || !p.Members["retry"] ||
		!strings.Contains(string(first.Body), `"retry":"new_session"`) {
		t.Fatalf("aborted commit: %s, want transaction_conflict, retry_with none, retry new_session", first.Body)
	}
	for _, key := range []string{"c1", "c2"} {
		again := n.c.Do("POST", base+"/commit", nil, "Idempotency-Key", key)
		if again.Status != 409 || !bytes.Equal(again.Body, first.Body) {
			t.Fatalf("commit again under %s: %d %s, want %s", key, again.Status, again.Body, first.Body)
		}
	}
	var view struct {
		State  string `json:"state"`
		Commit struct {
			Key, TransactionID, Outcome, Code string
		} `json:"commit"`
	}
	n.c.Do("GET", base, nil).JSON(t, 200, &view)
	if view.State != "committed" || view.Commit.Outcome != "aborted" || view.Commit.Code != "transaction_conflict" {
		t.Fatalf("session view %+v, want its commit's outcome aborted (transaction_conflict)", view)
	}
	var rv receiptView
	var raw struct {
		Envelope struct {
			Retry string `json:"retry"`
		} `json:"envelope"`
	}
	r := n.c.Do("GET", base+"/receipt", nil)
	r.JSON(t, 200, &rv)
	r.JSON(t, 200, &raw)
	if rv.State != "terminal" || rv.TransactionID != p.TransactionID || rv.Envelope == nil || rv.Envelope.Outcome != "aborted" ||
		rv.Envelope.RetryWith != "none" || raw.Envelope.Retry != "new_session" {
		t.Fatalf("the commit's receipt: %s", r.Body)
	}
	other := n.beginSession(n.c)
	if p := n.c.Do("GET", "/v1/sessions/"+other.ID+"/receipt", nil).Problem(t, 404); p.Code != "receipt_not_found" {
		t.Fatalf("receipt of a session without a commit: %+v", p)
	}
	if p := n.c.Do("GET", "/v1/tables/t/docs/y", nil).Problem(t, 404); p.Code != "document_not_found" {
		t.Fatalf("the aborted session's write applied: %+v", p)
	}
}
