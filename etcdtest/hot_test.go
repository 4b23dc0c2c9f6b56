package etcdtest_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/internal/testsupport"
)

// Hot documents across nodes (issue 37 part 3): keyed batches of two idemd
// processes on one etcd that each increment one shared document. Each
// node's latches order its own batches; the two nodes meet as failed
// conditions on etcd, which are re-planned (receipt/replan.go), not
// refused.

// hotLeaseTTL is the nodes' -lease-ttl: idemd's default.
const hotLeaseTTL = "10s"

// hotBody inserts key's own document and increments the shared counter.
func hotBody(key, counter string) string {
	return `{"inserts":[{"id":"mark-` + key + `","doc":{}}],"transforms":[{"id":"` + counter +
		`","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`
}

// TestIdemd_HotDocumentIncrementsThroughTwoNodesAllCommit: 8, then 32,
// concurrent keyed increments of one document, spread over two nodes.
// Every batch commits (no transaction_conflict), the counter equals the
// commits, and every answer replays byte for byte through the other node.
func TestIdemd_HotDocumentIncrementsThroughTwoNodesAllCommit(t *testing.T) {
	c := sharedCluster(t)
	prefix := etcdtest.Prefix(t)
	cl := apitest.NewClient(t, "http://unused")
	// idemd's default lease, not startNode's 1 s: a re-plan never starts
	// past the lease of the receipt it publishes less its safety margin
	// (0.8 s of a 1 s lease, which a loaded machine's queue can use up).
	nodes := []*apitest.Client{
		cl.WithBase(startNode(t, cl, c, prefix, "node-a", nil, "-lease-ttl", hotLeaseTTL).Base()),
		cl.WithBase(startNode(t, cl, c, prefix, "node-b", nil, "-lease-ttl", hotLeaseTTL).Base()),
	}
	nodes[0].Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	// Under the race detector 16 clients instead of 32: still two per
	// node's executor slot, at half go-race's longest wait.
	counts := []int{8, 32}
	if raceEnabled {
		counts = []int{8, 16}
	}
	for _, clients := range counts {
		t.Run(fmt.Sprintf("clients=%d", clients), func(t *testing.T) {
			hotIncrements(t, nodes, clients)
		})
	}
	for i, n := range nodes {
		t.Logf("node %d: idem_contended_replans_total %s", i, gauge(t, n, "idem_contended_replans_total"))
	}
}

// hotIncrements sends clients keyed increments of counter ctr-<clients>
// at once, client i through node i%2, and checks the property.
func hotIncrements(t *testing.T, nodes []*apitest.Client, clients int) {
	counter := fmt.Sprintf("ctr-%d", clients)
	keys := make([]string, clients)
	answers := make([]*apitest.Response, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	deferred := make([]int, clients)
	for i := range clients {
		keys[i] = fmt.Sprintf("hot-%d-%d", clients, i)
		wg.Go(func() {
			answers[i], deferred[i], errs[i] = untilSettled(nodes[i%2], keys[i], hotBody(keys[i], counter))
		})
	}
	wg.Wait()
	t.Logf("%d clients: %d answers deferred (retry with the same key) before the commit", clients, sum(deferred))
	for i, r := range answers {
		if errs[i] != nil {
			t.Fatalf("%s: %v", keys[i], errs[i])
		}
		if r.Status != 201 {
			t.Fatalf("%s through node %d: %d %s, want 201: contention on a document is waited out", keys[i], i%2, r.Status, r.Body)
		}
	}
	var doc struct {
		Doc struct{ N int }
	}
	nodes[1].Do("GET", "/v1/tables/t/docs/"+counter, nil).JSON(t, 200, &doc)
	if doc.Doc.N != clients {
		t.Fatalf("%s.n = %d after %d commits", counter, doc.Doc.N, clients)
	}
	for i, r := range answers {
		again := nodes[(i+1)%2].Do("POST", "/v1/tables/t/batch", hotBody(keys[i], counter), "Idempotency-Key", keys[i])
		if again.Status != r.Status || !bytes.Equal(again.Body, r.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s replayed through the other node: %d %s, want %d %s byte for byte", keys[i], again.Status, again.Body, r.Status, r.Body)
		}
	}
}

// hotSettleMax bounds how long one client retries a deferred answer: far
// beyond a hot document's queue, so that only a hang fails.
const hotSettleMax = 2 * time.Minute

// untilSettled posts key's batch through n and, while the answer defers
// it — 429 overloaded or 503 pending, retry with the same key, as a loaded
// node gives when a latch wait or an executor slot runs out — posts it
// again (testsupport.Eventually's backoff), as a client following
// retry_with does. A refusal (409 transaction_conflict) or any other
// answer ends it; so does hotSettleMax.
func untilSettled(n *apitest.Client, key, body string) (r *apitest.Response, deferred int, err error) {
	testsupport.Eventually(hotSettleMax, func() bool {
		r, err = n.Try("POST", "/v1/tables/t/batch", body, "Idempotency-Key", key)
		if err != nil || (r.Status != 429 && r.Status != 503) {
			return true
		}
		deferred++
		return false
	})
	return r, deferred, err
}

func sum(xs []int) (n int) {
	for _, x := range xs {
		n += x
	}
	return n
}
