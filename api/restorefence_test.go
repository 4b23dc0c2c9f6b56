package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
)

// TestRestoreFence_UnknownKeysFirstSentBeforeTheRestoreAreRefusedUntilRetentionEnds:
// on a store restored at R from a backup of B, a key it does not know whose
// Repeatability-First-Sent is before R is 409 key_may_have_executed
// (retry_with none, not_applied, the window B..R named), with no receipt
// and nothing executed; a key it knows replays; a key without the header,
// or first sent after R, executes; /healthz says when the store was
// restored; and once -retention has passed since R the fence is gone.
func TestRestoreFence_UnknownKeysFirstSentBeforeTheRestoreAreRefusedUntilRetentionEnds(t *testing.T) {
	clock := lease.NewSim(time.Unix(1_700_000_000, 0))
	restored, backup := clock.Now().Add(-time.Minute), clock.Now().Add(-10*time.Minute)
	n := newNode(t, config{clock: clock, retention: time.Hour, tombRetention: 48 * time.Hour,
		restore: &receipt.RestoreFence{BackupTime: backup, RestoredAt: restored}})
	n.createTable("t")
	date := func(at time.Time) string { return at.UTC().Format(http.TimeFormat) }

	if r := n.batch("t", "known", incOne); r.Status != 201 {
		t.Fatalf("a key without the header (unprotected): %d %s", r.Status, r.Body)
	}
	if r := n.batch("t", "known", incOne, "Repeatability-First-Sent", date(backup.Add(-time.Minute))); r.Status != 201 ||
		r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a known key first sent before the restore must replay: %d %s", r.Status, r.Body)
	}
	lost := n.batch("t", "lost", incOne, "Repeatability-First-Sent", date(restored.Add(-5*time.Minute)))
	checkProblem(t, lost.Problem(t, 409), "key_may_have_executed", 409, false, "none")
	p := lost.Problem(t, 409)
	if p.Outcome != "not_applied" || p.TransactionID == "" ||
		!strings.Contains(p.Detail, backup.UTC().Format(time.RFC3339)+" and "+restored.UTC().Format(time.RFC3339)) {
		t.Fatalf("the refusal must be not_applied and name the window: %s", lost.Body)
	}
	n.noReceipt("t", "lost")
	if got := n.doc("t", "c")["n"]; got != float64(1) {
		t.Fatalf("counter %v after the refusal, want 1 (only the known key's)", got)
	}
	if r := n.batch("t", "after", incOne, "Repeatability-First-Sent", date(restored.Add(time.Second))); r.Status != 201 {
		t.Fatalf("a key first sent after the restore: %d %s", r.Status, r.Body)
	}
	var h struct {
		Restored struct {
			RestoredAt time.Time `json:"restored_at"`
			FenceUntil time.Time `json:"fence_until"`
		} `json:"restored"`
	}
	n.c.Do("GET", "/healthz", nil).JSON(t, 200, &h)
	if !h.Restored.RestoredAt.Equal(restored) || !h.Restored.FenceUntil.Equal(restored.Add(time.Hour)) {
		t.Fatalf("/healthz restored %+v, want at %v until %v", h.Restored, restored, restored.Add(time.Hour))
	}

	clock.Advance(time.Hour - time.Minute - time.Second) // a second before the fence ends
	n.batch("t", "lost", incOne, "Repeatability-First-Sent", date(restored.Add(-5*time.Minute))).Problem(t, 409)
	clock.Advance(time.Second)
	if r := n.batch("t", "lost", incOne, "Repeatability-First-Sent", date(restored.Add(-5*time.Minute))); r.Status != 201 {
		t.Fatalf("after -retention since the restore the fence is gone: %d %s", r.Status, r.Body)
	}
}
