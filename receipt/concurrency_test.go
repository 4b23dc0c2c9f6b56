package receipt_test

import (
	"sync"
	"testing"
	"time"

	"github.com/idemdb/idem/receipt"
)

// TestConcurrentDuplicates_ApplyOnceAndAgree: 32 concurrent requests with
// the same key apply the batch once; every answer is the one committed
// envelope or a typed retryable in-progress (409) / pending (503) answer;
// afterwards a retry replays the envelope.
func TestConcurrentDuplicates_ApplyOnceAndAgree(t *testing.T) {
	cases := []struct {
		name     string
		nodes    int
		wait     time.Duration
		conflict bool // the batch is refused: the agreed answer is the abort
	}{
		{"one node no wait", 1, 0, false},
		{"one node waiting", 1, time.Minute, false},
		{"two nodes sharing the store", 2, 0, false},
		{"two nodes refused batch", 2, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for round := 0; round < 3; round++ {
				e := newEnv(t)
				hs := &hookStore{Store: e.db}
				svcs := []*receipt.Service{e.openOn(hs, receipt.Options{Node: "node-0"})}
				if tc.nodes == 2 {
					svcs = append(svcs, e.openOn(hs, receipt.Options{Node: "node-1"}))
				}
				createTable(t, svcs[0], "t")
				r := req("alice", "t", "dup", incBatch(t, "dup", "ctr"))
				if tc.conflict {
					voteNo(hs, "alice", "t")
					r.Batch = conflictBatch(t, "X")
				}
				r.Wait = tc.wait
				id := receipt.Bind("alice", "t", "dup")

				const n = 32
				answers := make([]receipt.Answer, n)
				errs := make([]error, n)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := 0; i < n; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						answers[i], errs[i] = svcs[i%len(svcs)].Execute(ctx, r)
					}()
				}
				close(start)
				wg.Wait()

				var committed *receipt.Answer
				others := 0
				for i, a := range answers {
					if errs[i] != nil {
						t.Fatalf("request %d: %v", i, errs[i])
					}
					switch {
					case a.Terminal:
						if committed == nil {
							committed = &answers[i]
						}
						if tc.conflict {
							wantVotedNo(t, a, id)
						} else if a.Status != 201 || a.Outcome != receipt.OutcomeCommitted || a.TxnID != id || string(a.Result) != incResult {
							t.Fatalf("request %d: terminal answer %+v", i, a)
						}
						wantSameEnvelope(t, a.Envelope, committed.Envelope)
					case (a.Status == 409 && a.Code == "idempotency_request_in_progress") || (a.Status == 503 && a.Code == "idempotency_receipt_pending"):
						if !a.Retryable || a.RetryWith != "same_key" || a.TxnID != id || a.Outcome != receipt.OutcomePending {
							t.Fatalf("request %d: %+v", i, a)
						}
						others++
					default:
						t.Fatalf("request %d: unexpected answer %+v", i, a)
					}
				}
				if tc.wait > 0 && tc.nodes == 1 && others != 0 {
					t.Fatalf("%d requests did not wait for the local flight", others)
				}
				// Whoever did not finish it, maintenance does.
				for _, s := range svcs {
					if _, err := s.MaintainOnce(ctx); err != nil {
						t.Fatal(err)
					}
				}
				replay := mustExecute(t, svcs[0], r)
				if !replay.Replayed {
					t.Fatalf("replay %+v", replay)
				}
				if committed != nil {
					wantSameEnvelope(t, replay.Envelope, committed.Envelope)
				}
				var executed, aborted uint64
				for _, s := range svcs {
					executed += s.Stats().Executed
					aborted += s.Stats().Aborted
				}
				if tc.conflict {
					if replay.Code != "table_not_found" || counter(t, svcs[0], "t", "ctr") != 0 || aborted != 1 || executed != 0 {
						t.Fatalf("refused batch: replay %+v, aborted %d, executed %d", replay, aborted, executed)
					}
					continue
				}
				wantCommitted(t, replay, id, true)
				if got := counter(t, svcs[0], "t", "ctr"); got != 1 {
					t.Fatalf("counter %d, want 1", got)
				}
				if executed != 1 {
					t.Fatalf("executed %d times", executed)
				}
			}
		})
	}
}
