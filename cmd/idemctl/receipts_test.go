package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/table"
)

// serve starts an API server with tokens for alice and the operator ops,
// and leaves alice's key "stuck" started; it returns the server's URL and
// the receipt's transaction ID.
func serve(t *testing.T) (string, string) {
	t.Helper()
	db, err := engine.Open(t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc, err := receipt.Open(context.Background(), db, receipt.WithTestKnobs(receipt.Options{MaintainInterval: -1, CleanInterval: -1}, testknobs.Receipt{SeparateDecide: true}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	ts := httptest.NewServer(api.New(svc, api.Options{Tokens: map[string]string{"tok-a": "alice", "tok-ops": "ops"}, Admins: []string{"ops"}}))
	t.Cleanup(ts.Close)
	if _, _, err := svc.Tables().Create(context.Background(), "alice", "t", 0); err != nil {
		t.Fatal(err)
	}
	b, err := table.DecodeBatch([]byte(`{"inserts":[{"id":"x","doc":{}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	disarm := testsupport.Arm(t, fault.ReceiptDecideBefore, `return("boom")`)
	if _, err := svc.Execute(context.Background(), receipt.Request{Principal: "alice", Table: "t", Key: "stuck", Batch: b}); err == nil {
		t.Fatal("no injected failure")
	}
	disarm()
	return ts.URL, receipt.Bind("alice", "t", "stuck")
}

func tokenFile(t *testing.T, token string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func expectExit(t *testing.T, want int, args ...string) string {
	t.Helper()
	var out, errs bytes.Buffer
	if got := run(args, &out, &errs); got != want {
		t.Fatalf("idemctl %v: exit %d, want %d\nstdout %s\nstderr %s", args, got, want, out.String(), errs.String())
	}
	return out.String() + errs.String()
}

// TestReceipts_AnOperatorFindsAndResolvesAStuckReceipt: list shows the
// stuck started receipt, resolve aborts it (the operator only: alice is
// refused with exit 1), get shows it terminal, and an unreachable server
// is exit 2.
func TestReceipts_AnOperatorFindsAndResolvesAStuckReceipt(t *testing.T) {
	base, txn := serve(t)
	ops := []string{"receipts", "-server", base, "-token-file", tokenFile(t, "tok-ops")}
	alice := []string{"receipts", "-server", base, "-token-file", tokenFile(t, "tok-a")}

	out := expectExit(t, exitOK, append(ops, "list", "-state", "started", "-all")...)
	if !strings.Contains(out, txn) || !strings.Contains(out, "stuck") || !strings.Contains(out, "alice") {
		t.Fatalf("list:\n%s", out)
	}
	var listed []api.ListedReceipt
	if err := json.Unmarshal([]byte(expectExit(t, exitOK, append(alice, "list", "-json")...)), &listed); err != nil || len(listed) != 1 || listed[0].State != "started" {
		t.Fatalf("alice's own listing: %+v %v", listed, err)
	}
	if out := expectExit(t, exitDamage, append(alice, "resolve", txn)...); !strings.Contains(out, "forbidden") {
		t.Fatalf("alice resolves:\n%s", out)
	}
	var res struct {
		Outcome string `json:"outcome"`
		Decided bool   `json:"decided_by_operator"`
	}
	if err := json.Unmarshal([]byte(expectExit(t, exitOK, append(ops, "resolve", txn)...)), &res); err != nil || res.Outcome != "aborted" || !res.Decided {
		t.Fatalf("resolve: %+v %v", res, err)
	}
	var v struct {
		State   string `json:"state"`
		Outcome string `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(expectExit(t, exitOK, append(alice, "get", "t", "stuck")...)), &v); err != nil || v.State != "terminal" || v.Outcome != "aborted" {
		t.Fatalf("get: %+v %v", v, err)
	}
	// Flags after the verb, and the default listing: every state, the
	// terminal receipt now included.
	listed = nil
	if err := json.Unmarshal([]byte(expectExit(t, exitOK, "receipts", "list", "-server", base, "-json", "-token-file", tokenFile(t, "tok-a"))), &listed); err != nil ||
		len(listed) != 1 || listed[0].State != "terminal" {
		t.Fatalf("alice's listing after the resolve: %+v %v", listed, err)
	}
	if out := expectExit(t, exitOK, "receipts", "list", "-state", "mutable", "-server", base, "-token-file", tokenFile(t, "tok-a")); strings.Contains(out, txn) {
		t.Fatalf("-state mutable lists the terminal receipt:\n%s", out)
	}
	expectExit(t, exitUsage, "receipts", "-server", "http://127.0.0.1:1", "list")
	expectExit(t, exitUsage, "receipts", "list", "-server", "http://127.0.0.1:1")
	expectExit(t, exitUsage, append(ops, "list", "-bogus")...)
	expectExit(t, exitUsage, append(ops, "frobnicate")...)
	expectExit(t, exitUsage, append(ops, "resolve")...)
}

// TestReceipts_SessionCommitReceipt: a session commit's receipt, bound
// to no table, is found by its session (issue 37); a session without a
// commit is the server's receipt_not_found (exit 1).
func TestReceipts_SessionCommitReceipt(t *testing.T) {
	base, _ := serve(t)
	post := func(path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok-a")
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode >= 300 {
			t.Fatalf("POST %s: %d %v", path, resp.StatusCode, out)
		}
		return out
	}
	sess := post("/v1/sessions", "")["session_id"].(string)
	open := post("/v1/sessions", "")["session_id"].(string)
	post("/v1/sessions/"+sess+"/batch", `{"table":"t","inserts":[{"id":"s","doc":{}}]}`)
	post("/v1/sessions/"+sess+"/commit", "")
	alice := []string{"receipts", "-server", base, "-token-file", tokenFile(t, "tok-a")}
	var v struct {
		TransactionID string `json:"transaction_id"`
		State         string `json:"state"`
		Outcome       string `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(expectExit(t, exitOK, append(alice, "session", sess)...)), &v); err != nil ||
		v.State != "terminal" || v.Outcome != "committed" || v.TransactionID != receipt.Bind("alice", "", sess) {
		t.Fatalf("session receipt: %+v %v", v, err)
	}
	if out := expectExit(t, exitDamage, append(alice, "session", open)...); !strings.Contains(out, "receipt_not_found") {
		t.Fatalf("a session without a commit:\n%s", out)
	}
	expectExit(t, exitUsage, append(alice, "session")...)
}
