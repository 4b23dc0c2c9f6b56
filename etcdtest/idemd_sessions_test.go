package etcdtest_test

import (
	"bytes"
	"testing"

	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/internal/apitest"
)

// TestIdemd_ASessionIsServedThroughAnyNode: a session begun on node-a is
// staged, read and committed through node-b, which forwards each step to
// node-a (Idem-Served-By) — the holder of the session's lease — and any
// node answers its state and replays its commit. Nothing staged is visible
// outside the session before the commit.
func TestIdemd_ASessionIsServedThroughAnyNode(t *testing.T) {
	c := sharedCluster(t)
	prefix := etcdtest.Prefix(t)
	cl := apitest.NewClient(t, "http://unused")
	a := startNode(t, cl, c, prefix, "node-a", nil, "-lease-ttl", "10s")
	b := startNode(t, cl, c, prefix, "node-b", nil, "-lease-ttl", "10s")
	ca, cb := cl.WithBase(a.Base()), cl.WithBase(b.Base())
	ca.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)

	var s struct {
		ID string `json:"session_id"`
	}
	ca.Do("POST", "/v1/sessions", nil).JSON(t, 201, &s)
	staged := cb.Do("POST", "/v1/sessions/"+s.ID+"/batch", `{"table":"t","transforms":[{"id":"ctr","ops":[{"op":"$inc","path":"n","value":5}],"upsert":true}]}`)
	if staged.Status != 200 || staged.Header.Get("Idem-Served-By") != "node-a" {
		t.Fatalf("a step through node-b: %d %v %s, want forwarded to node-a", staged.Status, staged.Header, staged.Body)
	}
	var own struct {
		Doc struct{ N int } `json:"doc"`
	}
	read := cb.Do("GET", "/v1/sessions/"+s.ID+"/tables/t/docs/ctr", nil)
	read.JSON(t, 200, &own)
	if own.Doc.N != 5 || read.Header.Get("Idem-Served-By") != "node-a" {
		t.Fatalf("read through node-b: %s %v", read.Body, read.Header)
	}
	cb.Do("GET", "/v1/tables/t/docs/ctr", nil).Problem(t, 404)
	var info struct {
		State  string `json:"state"`
		Stages int    `json:"stages"`
	}
	cb.Do("GET", "/v1/sessions/"+s.ID, nil).JSON(t, 200, &info)
	if info.State != "open" || info.Stages != 1 {
		t.Fatalf("the session's state from node-b: %+v", info)
	}
	first := cb.Do("POST", "/v1/sessions/"+s.ID+"/commit", nil)
	if first.Status != 201 || first.Header.Get("Idem-Served-By") != "node-a" {
		t.Fatalf("commit through node-b: %d %v %s", first.Status, first.Header, first.Body)
	}
	for _, via := range []*apitest.Client{ca, cb} {
		r := via.Do("POST", "/v1/sessions/"+s.ID+"/commit", nil)
		if r.Status != 201 || !bytes.Equal(r.Body, first.Body) || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("commit replay: %d %v %s", r.Status, r.Header, r.Body)
		}
	}
	cb.Do("GET", "/v1/tables/t/docs/ctr", nil).JSON(t, 200, &own)
	if own.Doc.N != 5 {
		t.Fatalf("after the commit ctr = %d, want 5", own.Doc.N)
	}
}
