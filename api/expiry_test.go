package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/idemdb/idem/lease"
)

const incOne = `{"transforms":[{"id":"c","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`

// expiringNode keeps receipts an hour and keys two days, on a simulated clock.
func expiringNode(t *testing.T) (*node, *lease.Sim) {
	t.Helper()
	clock := lease.NewSim(time.Unix(1_700_000_000, 0))
	n := newNode(t, config{clock: clock, retention: time.Hour, tombRetention: 48 * time.Hour})
	n.createTable("t")
	return n, clock
}

// TestKeyExpiry_TerminalAnswersSayHowLongTheyHold: a keyed answer carries
// Idem-Key-Expiry with the replay and protection ends, a replay the same
// field, and the receipt view the same times.
func TestKeyExpiry_TerminalAnswersSayHowLongTheyHold(t *testing.T) {
	n, clock := expiringNode(t)
	first := n.batch("t", "k1", incOne)
	if first.Status != 201 {
		t.Fatalf("%d %s", first.Status, first.Body)
	}
	now := clock.Now().Unix()
	want := fmt.Sprintf("replay=@%d, protect=@%d", now+3600, now+48*3600)
	if got := first.Header.Get("Idem-Key-Expiry"); got != want {
		t.Fatalf("Idem-Key-Expiry %q, want %q", got, want)
	}
	clock.Advance(time.Minute)
	again := n.batch("t", "k1", incOne)
	if again.Header.Get("Idempotent-Replayed") != "true" || again.Header.Get("Idem-Key-Expiry") != want {
		t.Fatalf("replay: %v", again.Header)
	}
	r := n.receipt("t", "k1")
	var v struct {
		State          string    `json:"state"`
		Outcome        string    `json:"outcome"`
		ReplayUntil    time.Time `json:"replay_until"`
		ProtectedUntil time.Time `json:"protected_until"`
	}
	r.JSON(t, 200, &v)
	if r.Header.Get("Idem-Key-Expiry") != want || v.State != "terminal" || v.Outcome != "committed" ||
		v.ReplayUntil.Unix() != now+3600 || v.ProtectedUntil.Unix() != now+48*3600 {
		t.Fatalf("receipt view %+v, header %q", v, r.Header.Get("Idem-Key-Expiry"))
	}
	// An answer whose envelope is not known makes no promise.
	if in := n.batch("t", "k1", `{"inserts":[{"id":"x","doc":{}}]}`); in.Status != 422 || in.Header.Get("Idem-Key-Expiry") != "" {
		t.Fatalf("mismatch: %d %v", in.Status, in.Header)
	}
}

// TestKeyExpired_AnExpiredKeyIsRefusedWithItsTransaction: past the
// retention the cleaner leaves a tombstone; the key, with the same body or
// another, is 409 idempotency_key_expired with its transaction ID and
// what became of it — across a restart — and the batch never applies again.
func TestKeyExpired_AnExpiredKeyIsRefusedWithItsTransaction(t *testing.T) {
	n, clock := expiringNode(t)
	first := n.batch("t", "k1", incOne)
	txn := first.Header.Get("Idem-Transaction-Id")
	done := clock.Now().UTC()
	clock.Advance(time.Hour + time.Second)
	if c, err := n.svc.CleanOnce(t.Context()); c != 1 || err != nil {
		t.Fatalf("clean: %d %v", c, err)
	}
	for round, body := range []string{incOne, `{"inserts":[{"id":"x","doc":{}}]}`, incOne} {
		if round == 2 {
			n.restart()
		}
		r := n.batch("t", "k1", body)
		p := r.Problem(t, 409)
		var o struct {
			Original struct {
				TransactionID  string    `json:"transaction_id"`
				State          string    `json:"state"`
				Outcome        string    `json:"outcome"`
				Completed      time.Time `json:"completed"`
				ProtectedUntil time.Time `json:"protected_until"`
				SameRequest    bool      `json:"same_request"`
			} `json:"original_receipt"`
		}
		if err := json.Unmarshal(r.Body, &o); err != nil {
			t.Fatal(err)
		}
		if p.Code != "idempotency_key_expired" || p.Retryable || p.RetryWith != "new_key" || p.Outcome != "not_applied" ||
			p.TransactionID != txn || r.Header.Get("Idem-Transaction-Id") != txn {
			t.Fatalf("round %d: %s", round, r.Body)
		}
		if oo := o.Original; oo.TransactionID != txn || oo.State != "expired" || oo.Outcome != "committed" ||
			oo.SameRequest != (body == incOne) || oo.Completed.Unix() != done.Unix() || oo.ProtectedUntil.Unix() != done.Add(48*time.Hour).Unix() {
			t.Fatalf("round %d: original %+v", round, oo)
		}
		if got, want := r.Header.Get("Idem-Key-Expiry"), fmt.Sprintf("protect=@%d", done.Add(48*time.Hour).Unix()); got != want {
			t.Fatalf("Idem-Key-Expiry %q, want %q", got, want)
		}
	}
	if got := n.doc("t", "c")["n"]; got != float64(1) {
		t.Fatalf("counter %v: the expired key applied again", got)
	}
	var v struct {
		State   string     `json:"state"`
		Outcome string     `json:"outcome"`
		Created *time.Time `json:"created"`
	}
	n.receipt("t", "k1").JSON(t, 200, &v)
	if v.State != "expired" || v.Outcome != "committed" || v.Created != nil {
		t.Fatalf("receipt view %+v", v)
	}
}

// TestKeyMismatch_NamesTheEntriesThatDiffer: the 422 says, entry by entry,
// what differs from the request the key is bound to.
func TestKeyMismatch_NamesTheEntriesThatDiffer(t *testing.T) {
	n := newNode(t, config{})
	n.createTable("t")
	if r := n.batch("t", "k", `{"inserts":[{"id":"a","doc":{"v":1}}],"deletes":["x"]}`); r.Status != 201 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	r := n.batch("t", "k", `{"inserts":[{"id":"a","doc":{"v":2}}]}`)
	r.Problem(t, 422)
	var p struct {
		Differences struct {
			Complete bool `json:"complete"`
			Entries  []struct {
				Change, List, ID string
				Index            int
			} `json:"entries"`
		} `json:"differences"`
	}
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatal(err)
	}
	d := p.Differences
	if !d.Complete || len(d.Entries) != 2 || d.Entries[0].Change != "changed" || d.Entries[0].List != "inserts" || d.Entries[0].ID != "a" ||
		d.Entries[1].Change != "removed" || d.Entries[1].List != "deletes" || d.Entries[1].Index != 0 || d.Entries[1].ID != "" {
		t.Fatalf("differences %s", r.Body)
	}
}

// TestFirstSent_ANewKeyFirstSentBeyondTheKeyMemoryIsRefused: a new key
// whose Repeatability-First-Sent lies further back than the server keeps
// keys (here 48 h) is 412 first_sent_too_old, with no receipt made; one
// first sent within it executes; a known key replays whatever it says; a
// malformed value is 400.
func TestFirstSent_ANewKeyFirstSentBeyondTheKeyMemoryIsRefused(t *testing.T) {
	n, clock := expiringNode(t)
	date := func(ago time.Duration) string { return clock.Now().Add(-ago).UTC().Format(http.TimeFormat) }
	r := n.batch("t", "old", incOne, "Repeatability-First-Sent", date(49*time.Hour))
	p := r.Problem(t, 412)
	if p.Code != "first_sent_too_old" || p.Outcome != "not_applied" || p.RetryWith != "new_key" || p.TransactionID == "" {
		t.Fatalf("%s", r.Body)
	}
	n.noReceipt("t", "old")
	if r := n.batch("t", "recent", incOne, "Repeatability-First-Sent", date(47*time.Hour)); r.Status != 201 {
		t.Fatalf("within the memory: %d %s", r.Status, r.Body)
	}
	if r := n.batch("t", "recent", incOne, "Repeatability-First-Sent", date(100*time.Hour)); r.Status != 201 || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a known key: %d %s", r.Status, r.Body)
	}
	for _, bad := range []string{"yesterday", date(-time.Hour)} {
		if p := n.batch("t", "bad", incOne, "Repeatability-First-Sent", bad).Problem(t, 400); p.Code != "invalid_request" {
			t.Fatalf("%q: %+v", bad, p)
		}
	}
}
