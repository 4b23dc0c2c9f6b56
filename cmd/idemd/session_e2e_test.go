package main

import (
	"bytes"
	"testing"

	"github.com/idemdb/idem/internal/apitest"
)

// TestE2E_SessionsAcrossARestart: real idemd processes on one data
// directory, SIGKILLed in between. A committed session's commit, and a
// commit aborted by a conflict, replay byte for byte from the next
// process, under the session ID or the commit's key alike; a session left
// open by the killed process is presumed aborted by its successor — its
// staged write never applies and its commit is session_aborted; and a
// session's staged write is never visible outside it.
func TestE2E_SessionsAcrossARestart(t *testing.T) {
	c := apitest.NewClient(t, "http://unused")
	data := t.TempDir()
	p1 := apitest.Start(t, c, data, nil, "-lease-ttl", "2s")
	c1 := c.WithBase(p1.Base())
	c1.Do("PUT", "/v1/tables/acct", nil).JSON(t, 201, nil)
	c1.Do("PUT", "/v1/tables/log", nil).JSON(t, 201, nil)
	c1.Do("POST", "/v1/tables/acct/batch", `{"inserts":[{"id":"a","doc":{"bal":100}},{"id":"b","doc":{"bal":0}}]}`).JSON(t, 201, nil)

	type session struct {
		ID    string `json:"session_id"`
		State string `json:"state"`
	}
	begin := func(cl *apitest.Client) string {
		var s session
		cl.Do("POST", "/v1/sessions", `{"ttl_seconds":60}`).JSON(t, 201, &s)
		return s.ID
	}
	stage := func(cl *apitest.Client, id, body string) {
		cl.Do("POST", "/v1/sessions/"+id+"/batch", body).JSON(t, 200, nil)
	}
	// A transfer on two tables, committed under the session ID.
	transfer := begin(c1)
	stage(c1, transfer, `{"tables":{"acct":{"transforms":[{"id":"a","ops":[{"op":"$inc","path":"bal","value":-30}]},{"id":"b","ops":[{"op":"$inc","path":"bal","value":30}]}]},"log":{"inserts":[{"id":"t1","doc":{"amount":30}}]}}}`)
	var own struct {
		Doc map[string]any `json:"doc"`
	}
	c1.Do("GET", "/v1/sessions/"+transfer+"/tables/acct/docs/a", nil).JSON(t, 200, &own)
	if own.Doc["bal"] != float64(70) {
		t.Fatalf("the session reads a=%v, want its own write 70", own.Doc)
	}
	var outside struct {
		Doc map[string]any `json:"doc"`
	}
	c1.Do("GET", "/v1/tables/acct/docs/a", nil).JSON(t, 200, &outside)
	if outside.Doc["bal"] != float64(100) {
		t.Fatalf("outside the session a=%v before the commit, want 100", outside.Doc)
	}
	committed := c1.Do("POST", "/v1/sessions/"+transfer+"/commit", nil)
	if committed.Status != 201 || string(committed.Body) != `{"inserted":1,"deleted":0,"transformed":2}` {
		t.Fatalf("commit: %d %s", committed.Status, committed.Body)
	}
	// A session whose read is overtaken: its commit is a stored conflict.
	stale := begin(c1)
	c1.Do("GET", "/v1/sessions/"+stale+"/tables/acct/docs/b", nil).JSON(t, 200, nil)
	stage(c1, stale, `{"table":"log","inserts":[{"id":"t2","doc":{}}]}`)
	c1.Do("POST", "/v1/tables/acct/batch", `{"transforms":[{"id":"b","ops":[{"op":"$inc","path":"bal","value":1}]}]}`).JSON(t, 201, nil)
	conflict := c1.Do("POST", "/v1/sessions/"+stale+"/commit", nil, "Idempotency-Key", "stale-commit")
	if conflict.Status != 409 || !bytes.Contains(conflict.Body, []byte(`"code":"transaction_conflict"`)) {
		t.Fatalf("commit after a conflicting write: %d %s", conflict.Status, conflict.Body)
	}
	// A session left open when the process dies.
	open := begin(c1)
	stage(c1, open, `{"table":"acct","transforms":[{"id":"a","ops":[{"op":"$inc","path":"bal","value":-1000}]}]}`)

	c1.CloseIdleConnections()
	p1.Kill()
	p2 := apitest.Start(t, c, data, nil, "-lease-ttl", "2s")
	c2 := c.WithBase(p2.Base())

	for _, tc := range []struct {
		name, id, key string
		first         *apitest.Response
	}{
		{"committed, by session ID", transfer, "", committed},
		{"committed, under another key", transfer, "some-other-key", committed},
		{"conflict, by its key", stale, "stale-commit", conflict},
	} {
		var headers []string
		if tc.key != "" {
			headers = []string{"Idempotency-Key", tc.key}
		}
		r := c2.Do("POST", "/v1/sessions/"+tc.id+"/commit", nil, headers...)
		if r.Status != tc.first.Status || !bytes.Equal(r.Body, tc.first.Body) || r.Header.Get("Idempotent-Replayed") != "true" ||
			r.Header.Get("Idem-Transaction-Id") != tc.first.Header.Get("Idem-Transaction-Id") {
			t.Fatalf("%s after the restart: %d %s %v, first %d %s", tc.name, r.Status, r.Body, r.Header, tc.first.Status, tc.first.Body)
		}
	}
	// The open session is presumed aborted: the new incarnation's
	// maintenance ends it (its first pass runs within a second), and a
	// commit meanwhile ends it itself.
	r := c2.Do("POST", "/v1/sessions/"+open+"/commit", nil)
	if r.Status != 409 || !bytes.Contains(r.Body, []byte(`"code":"session_aborted"`)) {
		t.Fatalf("commit of the session the killed process held: %d %s", r.Status, r.Body)
	}
	var s struct {
		State  string `json:"state"`
		Reason string `json:"reason"`
	}
	c2.Do("GET", "/v1/sessions/"+open, nil).JSON(t, 200, &s)
	if s.State != "aborted" || s.Reason != "owner_lost" {
		t.Fatalf("the open session after the restart: %+v", s)
	}
	var a, b struct {
		Doc map[string]any `json:"doc"`
	}
	c2.Do("GET", "/v1/tables/acct/docs/a", nil).JSON(t, 200, &a)
	c2.Do("GET", "/v1/tables/acct/docs/b", nil).JSON(t, 200, &b)
	if a.Doc["bal"] != float64(70) || b.Doc["bal"] != float64(31) {
		t.Fatalf("balances after the restart a=%v b=%v, want 70 and 31 (the transfer once, nothing of the others)", a.Doc, b.Doc)
	}
	c2.Do("GET", "/v1/tables/log/docs/t2", nil).Problem(t, 404)
	c2.Do("GET", "/v1/tables/log/docs/t1", nil).JSON(t, 200, nil)
}
