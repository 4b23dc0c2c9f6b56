package api_test

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
)

// These tests arm process-wide failpoints, so none of them is parallel
// (parallel tests only start once every sequential test has finished).
//
// Note on `pause`: a released `pause` injects nothing (fault.Eval reports a
// term without a value as not fired), so a request held at
// receipt/decide-before simply carries on and commits once released.

type answer struct {
	r   *apitest.Response
	err error
}

func goBatch(n *node, key, body string, headers ...string) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		hs := append([]string{"Idempotency-Key", key}, headers...)
		r, err := n.c.Try("POST", "/v1/tables/t/batch", body, hs...)
		ch <- answer{r, err}
	}()
	return ch
}

func recv(t *testing.T, ch <-chan answer) *apitest.Response {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatal(a.err)
		}
		return a.r
	case <-time.After(30 * time.Second):
		t.Fatal("no answer within 30s")
	}
	return nil
}

// checkReleasedPause asserts the answer of a request whose pause was
// released: it committed.
func checkReleasedPause(t *testing.T, r *apitest.Response) {
	t.Helper()
	if r.Status != 201 {
		t.Fatalf("released request answered %d, want 201", r.Status)
	}
}

// TestKeyed_InProgressIs409_PreferWaitGetsTheEnvelope: while a key's
// request executes, a duplicate answers 409 idempotency_request_in_progress
// with Retry-After; a duplicate with Prefer: wait=N waits for the terminal
// envelope instead. The batch applies once.
func TestKeyed_InProgressIs409_PreferWaitGetsTheEnvelope(t *testing.T) {
	clock := lease.NewSim(time.Unix(1_700_000_000, 0))
	n := newNode(t, config{clock: clock, separateDecide: true})
	n.createTable("t")
	testsupport.Poll(t, "the renewal supervisor's timer", testsupport.Patience, func() bool { return clock.Timers() >= 1 })
	base := clock.Timers()

	unpause := testsupport.Arm(t, fault.ReceiptDecideBefore, "pause")
	held := goBatch(n, "k", incBody)
	v := n.waitState("t", "k", "started")

	dup := n.batch("t", "k", incBody)
	p := dup.Problem(t, 409)
	checkProblem(t, p, "idempotency_request_in_progress", 409, true, "same_key")
	checkKeyed(t, dup, p, "pending")
	if p.TransactionID != v.TransactionID || dup.Header.Get("Retry-After") != "1" || dup.Header.Get("Idempotency-Key") != "k" {
		t.Fatalf("in-progress answer %v %s", dup.Header, dup.Body)
	}
	if dup.Header.Get("Idempotent-Replayed") != "" {
		t.Fatal("in-progress answer marked replayed")
	}

	waiter := goBatch(n, "k", incBody, "Prefer", "wait=5")
	// The waiter parks on the service clock until the flight ends.
	testsupport.Poll(t, "the waiter to park", testsupport.Patience, func() bool { return clock.Timers() > base })
	select {
	case a := <-waiter:
		t.Fatalf("waiter answered while the request was held: %+v", a)
	default:
	}
	unpause()
	checkReleasedPause(t, recv(t, held))
	w := recv(t, waiter)
	var res result
	w.JSON(t, 201, &res)
	if res != (result{Transformed: 1}) || w.Header.Get("Preference-Applied") != "wait=5" ||
		w.Header.Get("Idem-Transaction-Id") != v.TransactionID {
		t.Fatalf("waiter: %s %v", w.Body, w.Header)
	}
	again := n.batch("t", "k", incBody)
	if again.Status != 201 || !bytes.Equal(again.Body, w.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s %v", again.Status, again.Body, again.Header)
	}
	if d := n.doc("t", "c"); d["n"] != float64(1) {
		t.Fatalf("$inc applied %v times", d["n"])
	}
}

// TestKeyed_OverloadedLeavesReceiptPending: with the executor full, a new
// key answers 429 overloaded with Retry-After; its receipt is recorded
// pending and a retry with the same key executes it.
func TestKeyed_OverloadedLeavesReceiptPending(t *testing.T) {
	// One principal fills the executor: its in-flight quota must let it.
	n := newNode(t, config{executorMax: 1, principalInflight: 2, separateDecide: true})
	n.createTable("t")
	unpause := testsupport.Arm(t, fault.ReceiptDecideBefore, "pause")
	held := goBatch(n, "busy", `{"inserts":[{"id":"busy","doc":{}}]}`)
	n.waitState("t", "busy", "started")
	testsupport.Poll(t, "the executor slot", testsupport.Patience, func() bool { return n.svc.Stats().ExecutorBusy == 1 })

	r := n.batch("t", "k", incBody)
	p := r.Problem(t, 429)
	checkProblem(t, p, "overloaded", 429, true, "same_key")
	checkKeyed(t, r, p, "pending")
	if r.Header.Get("Retry-After") != "1" || r.Header.Get("Idempotency-Key") != "k" {
		t.Fatalf("overloaded headers %v", r.Header)
	}
	v := n.receiptView("t", "k")
	if v.State != "pending" || v.TransactionID != p.TransactionID || v.Owner == "" || v.Envelope != nil {
		t.Fatalf("receipt of the overloaded request: %+v", v)
	}
	unpause()
	checkReleasedPause(t, recv(t, held))

	ok := n.batch("t", "k", incBody)
	var res result
	ok.JSON(t, 201, &res)
	if res.Transformed != 1 || ok.Header.Get("Idem-Transaction-Id") != p.TransactionID {
		t.Fatalf("retry after overload: %s %v", ok.Body, ok.Header)
	}
	n.batch("t", "busy", `{"inserts":[{"id":"busy","doc":{}}]}`).JSON(t, 201, nil)
	if d := n.doc("t", "c"); d["n"] != float64(1) {
		t.Fatalf("n = %v", d["n"])
	}
	if n.svc.Stats().Overloaded == 0 {
		t.Fatal("overloaded answer not counted")
	}
}

// TestKeyed_InternalIsRetryableWithSameKey: a request whose execution fails
// with an unclassified error after it started answers 500 internal
// (retryable, same_key); the receipt stays started and the retry converges
// on the committed envelope without applying the batch twice.
func TestKeyed_InternalIsRetryableWithSameKey(t *testing.T) {
	n := newNode(t, config{separateDecide: true})
	n.createTable("t")
	testsupport.Arm(t, fault.ReceiptDecideBefore, `1*return("boom")`)
	r := n.batch("t", "k", incBody)
	p := r.Problem(t, 500)
	checkProblem(t, p, "internal", 500, true, "same_key")
	if r.Header.Get("Idempotency-Key") != "k" {
		t.Fatalf("key echo: %v", r.Header)
	}
	if v := n.receiptView("t", "k"); v.State != "started" {
		t.Fatalf("receipt after internal: %+v", v)
	}
	ok := n.batch("t", "k", incBody)
	ok.JSON(t, 201, nil)
	if d := n.doc("t", "c"); d["n"] != float64(1) {
		t.Fatalf("n = %v", d["n"])
	}
}

// TestKeyed_PresumedAbortIsTransactionAborted: with the presume-abort
// recovery policy, a started, undecided receipt is reconciled by aborting:
// 409 transaction_aborted (retry with a new key), replayed as stored, the
// batch not applied.
func TestKeyed_PresumedAbortIsTransactionAborted(t *testing.T) {
	n := newNode(t, config{presumeAbort: true, separateDecide: true})
	n.createTable("t")
	disarm := testsupport.Arm(t, fault.ReceiptDecideBefore, `1*return("crash")`)
	n.batch("t", "k", incBody).Problem(t, 500)
	disarm()
	first := n.batch("t", "k", incBody)
	p := first.Problem(t, 409)
	checkProblem(t, p, "transaction_aborted", 409, true, "new_key")
	checkKeyed(t, first, p, "aborted")
	if hasHeader(first, "Retry-After") {
		t.Fatalf("an abort with Retry-After: %v", first.Header)
	}
	again := n.batch("t", "k", incBody)
	if !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %d %s", again.Status, again.Body)
	}
	checkProblem(t, n.c.Do("GET", "/v1/tables/t/docs/c", nil).Problem(t, 404), "document_not_found", 404, false, "new_key")
	// The document is free again: a new key applies.
	n.batch("t", "k2", incBody).JSON(t, 201, nil)
}

// TestKeyed_ReceiptPendingConverges: when the outcome of a durable step is
// unknown (an fsync failure makes the write ambiguous and fail-stops the
// engine), the answer is 503 idempotency_receipt_pending with Retry-After;
// after a restart, a retry with the same key converges on one committed
// envelope and the batch applied once.
func TestKeyed_ReceiptPendingConverges(t *testing.T) {
	testsupport.SkipOnReferenceStore(t, "it fails the WAL's fsync")
	t.Run("receipt publication ambiguous", func(t *testing.T) {
		// A simulated clock keeps the renewal supervisor quiet: the one WAL
		// group the failpoint hits is the request's.
		n := newNode(t, config{clock: lease.NewSim(time.Unix(1_700_000_000, 0))})
		n.createTable("t")
		disarm := testsupport.Arm(t, fault.WALSyncBefore, `1*return("eio")`)
		r := n.batch("t", "k", incBody)
		disarm()
		p := r.Problem(t, 503)
		checkProblem(t, p, "idempotency_receipt_pending", 503, true, "same_key")
		checkKeyed(t, r, p, "pending")
		if r.Header.Get("Retry-After") != "1" || r.Header.Get("Idempotency-Key") != "k" {
			t.Fatalf("pending headers %v", r.Header)
		}
		n.restart()
		converge(t, n, "k", p.TransactionID)
	})
	t.Run("decision unknown", func(t *testing.T) {
		n := newNode(t, config{clock: lease.NewSim(time.Unix(1_700_000_000, 0)), separateDecide: true})
		n.createTable("t")
		// Leave the receipt started with its intents prepared and no
		// decision (the request itself answers 500)...
		disarm := testsupport.Arm(t, fault.ReceiptDecideBefore, `1*return("crash")`)
		n.batch("t", "k", incBody).Problem(t, 500)
		disarm()
		if v := n.receiptView("t", "k"); v.State != "started" {
			t.Fatalf("receipt %+v", v)
		}
		// ...then the retry's decision write is ambiguous.
		disarm = testsupport.Arm(t, fault.WALSyncBefore, `1*return("eio")`)
		r := n.batch("t", "k", incBody)
		disarm()
		p := r.Problem(t, 503)
		checkProblem(t, p, "idempotency_receipt_pending", 503, true, "same_key")
		checkKeyed(t, r, p, "pending")
		if r.Header.Get("Retry-After") != "1" {
			t.Fatalf("pending headers %v", r.Header)
		}
		n.restart()
		converge(t, n, "k", p.TransactionID)
	})
}

// converge retries key until it is committed and checks the batch applied
// once.
func converge(t *testing.T, n *node, key, txn string) {
	t.Helper()
	first := n.batch("t", key, incBody)
	var res result
	first.JSON(t, 201, &res)
	if res.Transformed != 1 || first.Header.Get("Idem-Transaction-Id") != txn {
		t.Fatalf("converged answer %s %v", first.Body, first.Header)
	}
	again := n.batch("t", key, incBody)
	if !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %d %s", again.Status, again.Body)
	}
	if d := n.doc("t", "c"); d["n"] != float64(1) {
		t.Fatalf("$inc applied %v times", d["n"])
	}
}

// TestKeyed_ConcurrentDuplicatesApplyOnce: 16 clients send the same key at
// once. Without Prefer each gets the committed envelope or 409 in-progress
// with Retry-After; with Prefer: wait=5 each gets the committed envelope.
// Either way the batch applies once.
func TestKeyed_ConcurrentDuplicatesApplyOnce(t *testing.T) {
	const clients = 16
	for _, tc := range []struct {
		name   string
		prefer []string
	}{{"no prefer", nil}, {"prefer wait", []string{"Prefer", "wait=5"}}} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, config{})
			n.createTable("t")
			start := make(chan struct{})
			answers := make(chan answer, clients)
			var wg sync.WaitGroup
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					r, err := n.c.Try("POST", "/v1/tables/t/batch", incBody, append([]string{"Idempotency-Key", "dup"}, tc.prefer...)...)
					answers <- answer{r, err}
				}()
			}
			close(start)
			wg.Wait()
			close(answers)
			var committed []byte
			var fresh, replays, inProgress int
			for a := range answers {
				if a.err != nil {
					t.Fatal(a.err)
				}
				r := a.r
				switch r.Status {
				case 201:
					if committed == nil {
						committed = r.Body
					} else if !bytes.Equal(committed, r.Body) {
						t.Fatalf("two committed bodies: %s, %s", committed, r.Body)
					}
					if r.Header.Get("Idempotent-Replayed") == "true" {
						replays++
					} else {
						fresh++
					}
				case 409:
					if tc.prefer != nil {
						t.Fatalf("Prefer: wait answered 409: %s", r.Body)
					}
					p := r.Problem(t, 409)
					checkProblem(t, p, "idempotency_request_in_progress", 409, true, "same_key")
					if r.Header.Get("Retry-After") == "" {
						t.Fatal("in-progress without Retry-After")
					}
					inProgress++
				default:
					t.Fatalf("unexpected answer %d %s", r.Status, r.Body)
				}
			}
			if fresh != 1 || fresh+replays+inProgress != clients {
				t.Fatalf("fresh=%d replays=%d in-progress=%d", fresh, replays, inProgress)
			}
			if string(committed) != `{"inserted":0,"deleted":0,"transformed":1}` {
				t.Fatalf("committed %s", committed)
			}
			if d := n.doc("t", "c"); d["n"] != float64(1) {
				t.Fatalf("$inc applied %v times", d["n"])
			}
			t.Logf("fresh=%d replays=%d in-progress=%d", fresh, replays, inProgress)
		})
	}
}

// TestHealthz_FailStoppedEngineIs503Unavailable: after an fsync failure the
// engine refuses writes until a restart, and /healthz says so (503
// unavailable) instead of reporting a healthy process; a restart heals it.
func TestHealthz_FailStoppedEngineIs503Unavailable(t *testing.T) {
	testsupport.SkipOnReferenceStore(t, "it fails the WAL's fsync")
	n := newNode(t, config{})
	n.createTable("t")
	disarm := testsupport.Arm(t, fault.WALSyncBefore, `return("eio")`)
	r := n.batch("t", "k-fsync", `{"inserts":[{"id":"a","doc":{}}]}`)
	disarm()
	if r.Status != 503 && r.Status != 500 {
		t.Fatalf("batch during a failed fsync answered %d", r.Status)
	}
	p := n.c.Do("GET", "/healthz", nil).Problem(t, 503)
	checkProblem(t, p, "unavailable", 503, true, "same_key")
	n.restart()
	n.c.Do("GET", "/healthz", nil).JSON(t, 200, nil)
}
