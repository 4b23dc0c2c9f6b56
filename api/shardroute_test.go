package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store/memstore"
)

// TestShardOf_Pinned pins the routing hash: SHA-256 over the
// length-prefixed principal and table, its first 8 bytes big-endian, mod
// k. A change of hash moves every table of a deployment away from its
// receipts, so it must fail here first. The length prefix is what keeps
// ("ab", "c") and ("a", "bc") apart.
func TestShardOf_Pinned(t *testing.T) {
	for _, c := range []struct {
		principal, table string
		k2, k3, k7       int
	}{
		{"anonymous", "orders", 1, 0, 2},
		{"anonymous", "users", 0, 0, 3},
		{"alice", "orders", 0, 2, 6},
		{"bob", "orders", 1, 0, 3},
		{"", "", 0, 2, 5},
		{"anonymous", "", 1, 2, 5},
		{"ab", "c", 1, 2, 5},
		{"a", "bc", 0, 1, 4},
	} {
		got := [3]int{api.ShardOf(c.principal, c.table, 2), api.ShardOf(c.principal, c.table, 3), api.ShardOf(c.principal, c.table, 7)}
		if want := [3]int{c.k2, c.k3, c.k7}; got != want {
			t.Errorf("ShardOf(%q, %q, 2/3/7) = %v, want %v", c.principal, c.table, got, want)
		}
		if k := api.ShardOf(c.principal, c.table, 1); k != 0 {
			t.Errorf("ShardOf(%q, %q, 1) = %d: one shard is shard 0", c.principal, c.table, k)
		}
	}
}

// shardedNode is an api.Server over two receipt services, each on its own
// reference store: a two-shard deployment of one node.
type shardedNode struct {
	stores []*memstore.Store
	svcs   []*receipt.Service
	c      *apitest.Client
}

func newShardedNode(t *testing.T, k int) *shardedNode {
	t.Helper()
	n := &shardedNode{}
	for i := range k {
		st := memstore.New()
		svc, err := receipt.Open(context.Background(), st, receipt.Options{MaintainInterval: -1, CleanInterval: -1, Logger: quiet, SessionShard: i + 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(svc.Close)
		n.stores, n.svcs = append(n.stores, st), append(n.svcs, svc)
	}
	ts := httptest.NewServer(api.NewSharded(n.svcs, api.Options{Logger: quiet}))
	t.Cleanup(ts.Close)
	n.c = apitest.NewClient(t, ts.URL)
	return n
}

// tablesOn are n tables named t<i>, by the shard they route to.
func tablesOn(k, n int) [][]string {
	by := make([][]string, k)
	for i := range n {
		name := fmt.Sprintf("t%d", i)
		s := api.ShardOf("anonymous", name, k)
		by[s] = append(by[s], name)
	}
	return by
}

// TestShards_TablesAndReceiptsLiveOnTheirShard: a table, its documents and
// its keyed receipts are on the store of its shard and on no other; reads,
// replays and the table list see them through the one API.
func TestShards_TablesAndReceiptsLiveOnTheirShard(t *testing.T) {
	n := newShardedNode(t, 2)
	by := tablesOn(2, 12)
	if len(by[0]) == 0 || len(by[1]) == 0 {
		t.Fatalf("tables by shard %v: want both shards used", by)
	}
	ctx := context.Background()
	for k, names := range by {
		for _, name := range names {
			if r := n.c.Do("PUT", "/v1/tables/"+name, nil); r.Status != 201 {
				t.Fatalf("create %s: %d %s", name, r.Status, r.Body)
			}
			first := n.c.Do("POST", "/v1/tables/"+name+"/batch", `{"inserts":[{"id":"d","doc":{"v":1}}]}`, "Idempotency-Key", "k1")
			again := n.c.Do("POST", "/v1/tables/"+name+"/batch", `{"inserts":[{"id":"d","doc":{"v":1}}]}`, "Idempotency-Key", "k1")
			if first.Status != 201 || again.Status != 201 || again.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("%s: keyed %d, replay %d (replayed %q)", name, first.Status, again.Status, again.Header.Get("Idempotent-Replayed"))
			}
			if r := n.c.Do("GET", "/v1/tables/"+name+"/docs/d", nil); r.Status != 200 {
				t.Fatalf("%s: read %d %s", name, r.Status, r.Body)
			}
			for other, svc := range n.svcs {
				_, err := svc.Lookup(ctx, "anonymous", name, "k1")
				_, gerr := svc.Tables().Get(ctx, "anonymous", name, "d")
				if here := other == k; here != (err == nil) || here != (gerr == nil) {
					t.Fatalf("%s (shard %d): on shard %d its receipt: %v, its document: %v", name, k, other, err, gerr)
				}
			}
		}
	}
	var listed []string
	for after := ""; ; {
		var page struct {
			Tables []struct{ Name string } `json:"tables"`
			Next   string                  `json:"next"`
		}
		path := "/v1/tables?limit=5"
		if after != "" {
			path += "&after=" + after
		}
		n.c.Do("GET", path, nil).JSON(t, 200, &page)
		for _, tb := range page.Tables {
			listed = append(listed, tb.Name)
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	all := slices.Concat(by...)
	slices.Sort(all)
	if !slices.Equal(listed, all) {
		t.Fatalf("tables listed in pages of 5: %v, want %v", listed, all)
	}
	var receipts []string
	for cursor := ""; ; {
		var page api.ReceiptList
		path := "/v1/receipts?state=terminal&limit=5"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		n.c.Do("GET", path, nil).JSON(t, 200, &page)
		for _, r := range page.Receipts {
			receipts = append(receipts, r.Table)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	slices.Sort(receipts)
	if !slices.Equal(receipts, all) {
		t.Fatalf("receipts listed in pages of 5: tables %v, want %v", receipts, all)
	}
}

// TestShards_SessionPinsItsFirstTable: a session begun on a table lives on
// its shard (its ID says which); a step on a table of the other shard is
// refused 409 session_cross_shard with nothing staged, and the session
// still commits its own shard's table.
func TestShards_SessionPinsItsFirstTable(t *testing.T) {
	n := newShardedNode(t, 2)
	by := tablesOn(2, 12)
	home, away := by[1][0], by[0][0]
	for _, name := range []string{home, away} {
		n.c.Do("PUT", "/v1/tables/"+name, nil)
	}
	var sess struct {
		ID     string `json:"session_id"`
		Stages int    `json:"stages"`
	}
	n.c.Do("POST", "/v1/sessions", `{"table":"`+home+`"}`).JSON(t, 201, &sess)
	if k, ok := api.SessionShardOf(sess.ID, 2); !ok || k != 1 {
		t.Fatalf("session %s: names shard %d (%v), want 1", sess.ID, k, ok)
	}
	if _, err := n.svcs[0].SessionInfo(context.Background(), "anonymous", sess.ID); !isNotFound(err) {
		t.Fatalf("session on shard 0: %v, want none", err)
	}
	stage := func(table string) *apitest.Response {
		return n.c.Do("POST", "/v1/sessions/"+sess.ID+"/batch", `{"table":"`+table+`","inserts":[{"id":"d","doc":{}}]}`)
	}
	p := stage(away).Problem(t, 409)
	if p.Code != "session_cross_shard" || p.Retryable {
		t.Fatalf("a step on the other shard's table: %+v, want session_cross_shard", p)
	}
	if p := n.c.Do("GET", "/v1/sessions/"+sess.ID+"/tables/"+away+"/docs/d", nil).Problem(t, 409); p.Code != "session_cross_shard" {
		t.Fatalf("a read of the other shard's table: %+v", p)
	}
	stage(home).JSON(t, 200, &sess)
	if sess.Stages != 1 {
		t.Fatalf("stages %d after one step taken and one refused, want 1", sess.Stages)
	}
	if r := n.c.Do("POST", "/v1/sessions/"+sess.ID+"/commit", nil); r.Status != 201 {
		t.Fatalf("commit: %d %s", r.Status, r.Body)
	}
	if _, err := n.svcs[1].Tables().Get(context.Background(), "anonymous", home, "d"); err != nil {
		t.Fatalf("the committed document on its shard: %v", err)
	}
	if r := n.c.Do("GET", "/v1/sessions/"+sess.ID+"/receipt", nil); r.Status != 200 {
		t.Fatalf("the commit's receipt: %d %s", r.Status, r.Body)
	}
	// Without a table, the principal's own shard: ("anonymous", "").
	var bare struct {
		ID string `json:"session_id"`
	}
	n.c.Do("POST", "/v1/sessions", nil).JSON(t, 201, &bare)
	if k, _ := api.SessionShardOf(bare.ID, 2); k != api.ShardOf("anonymous", "", 2) {
		t.Fatalf("a session begun without a table is on shard %d, want %d", k, api.ShardOf("anonymous", "", 2))
	}
}

func isNotFound(err error) bool {
	var ce *code.Error
	return errors.As(err, &ce) && ce.Code == code.SessionNotFound
}

// TestShards_HealthNamesEveryShard: /healthz gives this process's owner on
// each shard.
func TestShards_HealthNamesEveryShard(t *testing.T) {
	n := newShardedNode(t, 2)
	var h struct {
		Owner  string `json:"owner"`
		Shards []struct {
			Owner string `json:"owner"`
		} `json:"shards"`
	}
	n.c.Do("GET", "/healthz", nil).JSON(t, 200, &h)
	if len(h.Shards) != 2 || h.Shards[0].Owner != h.Owner || h.Shards[1].Owner != n.svcs[1].Owner().String() {
		b, _ := json.Marshal(h)
		t.Fatalf("healthz %s: want both shards' owners", b)
	}
}

// TestShards_AStepIsForwardedToTheHolderOnItsShard: two nodes on two
// shards; n-a's incarnation differs between the shards (it restarted on
// shard 1). A step on n-a's session, which lives on shard 1, sent to n-b
// is forwarded to n-a, located through shard 1's node records, and n-a's
// answer — signed as its owners on both shards — is relayed.
func TestShards_AStepIsForwardedToTheHolderOnItsShard(t *testing.T) {
	stores := []*memstore.Store{memstore.New(), memstore.New()}
	lnA, lnB := listen(t), listen(t)
	open := func(node, adv string, shard int) *receipt.Service {
		svc, err := receipt.Open(context.Background(), stores[shard], receipt.Options{Node: node, Advertise: adv,
			MaintainInterval: -1, CleanInterval: -1, Logger: quiet, SessionShard: shard + 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(svc.Close)
		return svc
	}
	advA, advB := "http://"+lnA.Addr().String(), "http://"+lnB.Addr().String()
	open("n-a", advA, 1).Close() // n-a's next incarnation on shard 1 is its second
	a := []*receipt.Service{open("n-a", advA, 0), open("n-a", advA, 1)}
	if a[0].Owner() == a[1].Owner() {
		t.Fatalf("n-a is %v on both shards: the test needs two incarnations", a[0].Owner())
	}
	srvA := api.NewSharded(a, api.Options{Logger: quiet, Forward: &api.Forwarding{Node: "n-a", Secret: clusterSecret}})
	srvB := api.NewSharded([]*receipt.Service{open("n-b", advB, 0), open("n-b", advB, 1)},
		api.Options{Logger: quiet, Forward: &api.Forwarding{Node: "n-b", Secret: clusterSecret}})
	ca := apitest.NewClient(t, serve(t, lnA, srvA).URL)
	cb := ca.WithBase(serve(t, lnB, srvB).URL)
	home := tablesOn(2, 12)[1][0]
	ca.Do("PUT", "/v1/tables/"+home, nil).JSON(t, 201, nil)
	var sess struct {
		ID string `json:"session_id"`
	}
	ca.Do("POST", "/v1/sessions", `{"table":"`+home+`"}`).JSON(t, 201, &sess)
	r := cb.Do("POST", "/v1/sessions/"+sess.ID+"/batch", `{"table":"`+home+`","inserts":[{"id":"d","doc":{}}]}`)
	if r.Status != 200 || r.Header.Get("Idem-Served-By") != "n-a" {
		t.Fatalf("a step through n-b on n-a's session on shard 1: %d %v %s, want n-a's answer relayed", r.Status, r.Header, r.Body)
	}
}
