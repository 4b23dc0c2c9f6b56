package api_test

import (
	"testing"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
)

type listing struct {
	Receipts []struct {
		TransactionID string `json:"transaction_id"`
		Principal     string `json:"principal"`
		Key           string `json:"key"`
		State         string `json:"state"`
		Outcome       string `json:"outcome"`
		ResolvedBy    string `json:"resolved_by"`
	} `json:"receipts"`
	Next string `json:"next"`
}

// TestAdmin_OperatorsListAndResolveStuckReceiptsOthersOnlyTheirOwn: alice
// lists her own receipts and nobody else's; the operator lists everyone's,
// finds her stuck started receipt and resolves it — a presumed abort the
// key then replays — while alice may not resolve.
func TestAdmin_OperatorsListAndResolveStuckReceiptsOthersOnlyTheirOwn(t *testing.T) {
	n := newNode(t, config{tokens: map[string]string{"tok-alice": "alice", "tok-bob": "bob", "tok-ops": "ops"},
		admins: []string{"ops"}, separateDecide: true})
	alice, bob, ops := n.c.WithToken("tok-alice"), n.c.WithToken("tok-bob"), n.c.WithToken("tok-ops")
	alice.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	inc := `{"transforms":[{"id":"c","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`
	disarm := testsupport.Arm(t, fault.ReceiptDecideBefore, `1*return("boom")`)
	stuck := alice.Do("POST", "/v1/tables/t/batch", inc, "Idempotency-Key", "stuck")
	disarm()
	if stuck.Status != 500 {
		t.Fatalf("with the failpoint: %d %s", stuck.Status, stuck.Body)
	}
	txn := stuck.Header.Get("Idem-Transaction-Id")

	var mine listing
	alice.Do("GET", "/v1/receipts?state=started", nil).JSON(t, 200, &mine)
	if len(mine.Receipts) != 1 || mine.Receipts[0].Key != "stuck" || mine.Receipts[0].TransactionID != txn || mine.Receipts[0].State != "started" {
		t.Fatalf("alice's started receipts: %+v", mine)
	}
	var none listing
	bob.Do("GET", "/v1/receipts?state=started", nil).JSON(t, 200, &none)
	if len(none.Receipts) != 0 {
		t.Fatalf("bob sees %+v", none)
	}
	if p := bob.Do("GET", "/v1/receipts?principal=alice", nil).Problem(t, 403); p.Code != "forbidden" {
		t.Fatalf("bob lists alice's: %+v", p)
	}
	var all listing
	ops.Do("GET", "/v1/receipts?state=started&principal=", nil).JSON(t, 200, &all)
	if len(all.Receipts) != 1 || all.Receipts[0].Principal != "alice" {
		t.Fatalf("the operator's listing: %+v", all)
	}
	for _, bad := range []string{"state=done", "older_than=soon", "limit=0", "limit=1001", "cursor=%21%21"} {
		if p := alice.Do("GET", "/v1/receipts?"+bad, nil).Problem(t, 400); p.Code != "invalid_request" {
			t.Fatalf("%s: %+v", bad, p)
		}
	}

	if p := alice.Do("POST", "/v1/admin/receipts/"+txn+"/resolve", nil).Problem(t, 403); p.Code != "forbidden" {
		t.Fatalf("alice resolves: %+v", p)
	}
	var res struct {
		Outcome string `json:"outcome"`
		Decided bool   `json:"decided_by_operator"`
		Was     bool   `json:"was_terminal"`
	}
	ops.Do("POST", "/v1/admin/receipts/"+txn+"/resolve", nil).JSON(t, 200, &res)
	if res.Outcome != "aborted" || !res.Decided || res.Was {
		t.Fatalf("resolution %+v", res)
	}
	r := alice.Do("POST", "/v1/tables/t/batch", inc, "Idempotency-Key", "stuck")
	if p := r.Problem(t, 409); p.Code != "transaction_aborted" || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the key after the resolution: %s", r.Body)
	}
	var done listing
	alice.Do("GET", "/v1/receipts?state=terminal", nil).JSON(t, 200, &done)
	if len(done.Receipts) != 1 || done.Receipts[0].ResolvedBy != "ops" || done.Receipts[0].Outcome != "aborted" {
		t.Fatalf("terminal listing: %+v", done)
	}
	if p := ops.Do("POST", "/v1/admin/receipts/00112233445566778899aabbccddeeff/resolve", nil).Problem(t, 404); p.Code != "receipt_not_found" {
		t.Fatalf("missing: %+v", p)
	}
	if r := alice.Do("GET", "/v1/tables/t/docs/c", nil); r.Status != 404 {
		t.Fatalf("the resolved batch applied: %d %s", r.Status, r.Body)
	}
}
