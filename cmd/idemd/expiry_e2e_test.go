package main

import (
	"testing"

	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/internal/testsupport"
)

// TestE2E_AnExpiredKeyIsRefusedNotExecutedAgain: a server that keeps
// receipts a second and cleans every 10 ms refuses the key once its
// receipt is gone — 409 idempotency_key_expired with the original
// transaction ID — and the batch never applies twice; with tombstones off
// the same flow executes again, as in every other idempotency system.
func TestE2E_AnExpiredKeyIsRefusedNotExecutedAgain(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name      string
		tombstone string
		refused   bool
	}{{"protected", "1h", true}, {"opted-out", "0", false}} {
		t.Run(v.name, func(t *testing.T) {
			p := apitest.Launch(t, t.TempDir(), nil, "-retention", "1s", "-clean-interval", "10ms", "-tombstone-retention", v.tombstone)
			c := apitest.NewClient(t, p.Base())
			c.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
			body := `{"transforms":[{"id":"c","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`
			first := c.Do("POST", "/v1/tables/t/batch", body, "Idempotency-Key", "k")
			if first.Status != 201 || first.Header.Get("Idem-Key-Expiry") == "" {
				t.Fatalf("first: %d %v %s", first.Status, first.Header, first.Body)
			}
			txn := first.Header.Get("Idem-Transaction-Id")
			var last *apitest.Response
			testsupport.Poll(t, "the receipt to be cleaned", testsupport.Patience, func() bool {
				last = c.Do("POST", "/v1/tables/t/batch", body, "Idempotency-Key", "k")
				return last.Header.Get("Idempotent-Replayed") != "true"
			})
			var doc struct {
				Doc struct {
					N int `json:"n"`
				} `json:"doc"`
			}
			c.Do("GET", "/v1/tables/t/docs/c", nil).JSON(t, 200, &doc)
			if !v.refused {
				if last.Status != 201 || doc.Doc.N != 2 {
					t.Fatalf("opted out: %d %s, counter %d", last.Status, last.Body, doc.Doc.N)
				}
				return
			}
			pr := last.Problem(t, 409)
			if pr.Code != "idempotency_key_expired" || pr.TransactionID != txn || pr.RetryWith != "new_key" || doc.Doc.N != 1 {
				t.Fatalf("after expiry: %s (counter %d), want 409 idempotency_key_expired for %s", last.Body, doc.Doc.N, txn)
			}
		})
	}
}
