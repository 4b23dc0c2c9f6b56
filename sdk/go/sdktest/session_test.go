package sdktest_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"testing"
	"time"

	idem "github.com/idemdb/idem/sdk/go"
	"github.com/idemdb/idem/sdk/go/idemapi"
)

// Sessions through the SDK, against a real idemd as the rest.

var sessionID = regexp.MustCompile(`^s[0-9a-f]{32}$`)

func ops(id string, path string, by int) map[string]any {
	return map[string]any{"transforms": []any{map[string]any{"id": id, "ops": []any{map[string]any{"op": "$inc", "path": path, "value": by}}}}}
}

// field reads a number of a document as JSON.
func field(t *testing.T, raw json.RawMessage, name string) int {
	t.Helper()
	var d map[string]int
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("document %s: %v", raw, err)
	}
	return d[name]
}

// wantProblem checks that err is the problem sentinel names, with status.
func wantProblem(t *testing.T, what string, err error, sentinel *idem.Error, status int) *idem.Error {
	t.Helper()
	var e *idem.Error
	if !errors.Is(err, sentinel) || !errors.As(err, &e) || e.Status != status {
		t.Fatalf("%s: %v, want %d %s", what, err, status, sentinel.Code)
	}
	return e
}

// TestSession_StageReadOwnWritesCommitReplay: a session stages on two
// tables, reads its own writes, which the plain document read does not
// see; its commit applies them once, a retry of the commit (the default
// key, or another) replays it, and the session takes no more steps.
func TestSession_StageReadOwnWritesCommitReplay(t *testing.T) {
	s := startServer(t)
	c := s.client(t, idem.Options{})
	for _, tb := range []string{"orders", "stock"} {
		if _, err := c.CreateTable(ctx, tb, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Batch(ctx, "stock", map[string]any{"inserts": []any{map[string]any{"id": "widget", "doc": map[string]any{"n": 10}}}}, nil); err != nil {
		t.Fatal(err)
	}

	sess, err := c.BeginSession(ctx, &idem.SessionOptions{TTL: time.Minute, Table: "orders"})
	if err != nil || !sessionID.MatchString(sess.ID) {
		t.Fatalf("begin: %+v %v", sess, err)
	}
	info, err := sess.Stage(ctx, "orders", map[string]any{"inserts": []any{map[string]any{"id": "o-1", "doc": map[string]any{"total": 12}}}})
	if err != nil || info.State != idemapi.SessionStateOpen || info.Stages != 1 || len(info.Staged) != 1 ||
		info.Staged[0] != (idemapi.StagedBatch{Table: "orders", Inserted: 1}) {
		t.Fatalf("stage: %+v %v", info, err)
	}
	if d := info.ExpiresAt.Sub(info.CreatedAt); d != time.Minute {
		t.Fatalf("the session lives %v, want the TTL asked, 1m", d)
	}
	info, err = sess.StageTables(ctx, map[string]any{"stock": ops("widget", "n", -1), "orders": ops("o-1", "total", 1)})
	if err != nil || info.Stages != 2 || len(info.Staged) != 2 ||
		info.Staged[0] != (idemapi.StagedBatch{Table: "orders", Transformed: 1}) || info.Staged[1] != (idemapi.StagedBatch{Table: "stock", Transformed: 1}) ||
		info.Result != (idemapi.BatchResult{Inserted: 1, Transformed: 2}) || info.Writes != 2 {
		t.Fatalf("stage on two tables: %+v %v", info, err)
	}

	if raw, err := sess.Get(ctx, "orders", "o-1"); err != nil || field(t, raw, "total") != 13 {
		t.Fatalf("the session's read of its own write: %s %v, want total 13", raw, err)
	}
	if raw, err := sess.Get(ctx, "stock", "widget"); err != nil || field(t, raw, "n") != 9 {
		t.Fatalf("the session's read of stock/widget: %s %v, want n 9", raw, err)
	}
	_, err = c.Doc(ctx, "orders", "o-1")
	wantProblem(t, "the plain read of a staged insert before the commit", err, idem.ErrDocumentNotFound, 404)
	if raw, err := c.Doc(ctx, "stock", "widget"); err != nil || field(t, raw, "n") != 10 {
		t.Fatalf("the plain read of stock/widget before the commit: %s %v, want n 10", raw, err)
	}

	first, err := sess.Commit(ctx, nil)
	if err != nil || first.Replayed || first.Inserted != 1 || first.Transformed != 2 || first.Deleted != 0 ||
		len(first.TransactionID) != 32 || first.Key != sess.ID {
		t.Fatalf("commit: %+v %v", first, err)
	}
	if raw, err := c.Doc(ctx, "orders", "o-1"); err != nil || field(t, raw, "total") != 13 {
		t.Fatalf("orders/o-1 after the commit: %s %v", raw, err)
	}
	if raw, err := c.Doc(ctx, "stock", "widget"); err != nil || field(t, raw, "n") != 9 {
		t.Fatalf("stock/widget after the commit: %s %v", raw, err)
	}

	again, err := sess.Commit(ctx, nil)
	if err != nil || !again.Replayed || again.TransactionID != first.TransactionID ||
		again.Inserted != first.Inserted || again.Transformed != first.Transformed || again.Deleted != first.Deleted {
		t.Fatalf("the commit again: %+v %v, want the replay of %+v", again, err, first)
	}
	// A handle on the session by its ID, under another key: the session's
	// one commit, replayed.
	other, err := c.Session(sess.ID).Commit(ctx, &idem.CommitOptions{Key: "another-key", Wait: time.Second})
	if err != nil || !other.Replayed || other.TransactionID != first.TransactionID || other.Key != "another-key" {
		t.Fatalf("the commit under another key: %+v %v", other, err)
	}
	if raw, _ := c.Doc(ctx, "stock", "widget"); field(t, raw, "n") != 9 {
		t.Fatal("a replayed commit applied again")
	}

	info, err = sess.Info(ctx)
	if err != nil || info.State != idemapi.SessionStateCommitted || info.CommitKey != sess.ID ||
		info.TransactionID != first.TransactionID || info.Stages != 2 || info.RetainedUntil.IsZero() {
		t.Fatalf("info after the commit: %+v %v", info, err)
	}
	_, err = sess.Stage(ctx, "orders", map[string]any{"deletes": []any{"o-1"}})
	if e := wantProblem(t, "a stage after the commit", err, idem.ErrSessionCommitted, 409); e.Retryable {
		t.Fatalf("session_committed is retryable: %+v", e)
	}
	_, err = sess.Abort(ctx)
	wantProblem(t, "an abort after the commit", err, idem.ErrSessionCommitted, 409)
}

// TestSession_AChangedReadIsATransactionConflict: a keyed batch changes a
// document the session read; the commit is the coordinator's abort,
// typed, applies nothing, and replays as such.
func TestSession_AChangedReadIsATransactionConflict(t *testing.T) {
	s := startServer(t)
	c := s.client(t, idem.Options{})
	if _, err := c.CreateTable(ctx, "t", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Batch(ctx, "t", map[string]any{"inserts": []any{map[string]any{"id": "x", "doc": map[string]any{"n": 1}}}}, nil); err != nil {
		t.Fatal(err)
	}
	sess, err := c.BeginSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if raw, err := sess.Get(ctx, "t", "x"); err != nil || field(t, raw, "n") != 1 {
		t.Fatalf("session read: %s %v", raw, err)
	}
	if _, err := sess.Stage(ctx, "t", map[string]any{"inserts": []any{map[string]any{"id": "y", "doc": map[string]any{}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Batch(ctx, "t", ops("x", "n", 5), &idem.BatchOptions{Key: "meanwhile"}); err != nil {
		t.Fatal(err)
	}

	_, err = sess.Commit(ctx, &idem.CommitOptions{Key: "c1"})
	e := wantProblem(t, "the commit after a conflicting write", err, idem.ErrTransactionConflict, 409)
	if e.Outcome != "aborted" || e.RetryWith != "none" || !e.NewSessionNeeded() || len(e.TransactionID) != 32 {
		t.Fatalf("conflict: %+v, want retry_with none, retry new_session", e)
	}
	if info, err := sess.Info(ctx); err != nil || info.State != idemapi.SessionStateCommitted || info.CommitOutcome != "aborted" ||
		info.CommitCode != idemapi.ErrorCodeTransactionConflict {
		t.Fatalf("the session after its aborted commit: %+v %v, want its commit's outcome", info, err)
	}
	_, err = sess.Commit(ctx, &idem.CommitOptions{Key: "c1"})
	if again := wantProblem(t, "the commit again", err, idem.ErrTransactionConflict, 409); *again != *e {
		t.Fatalf("the replayed conflict %+v differs from the first %+v", again, e)
	}
	_, err = c.Doc(ctx, "t", "y")
	wantProblem(t, "t/y after the aborted commit", err, idem.ErrDocumentNotFound, 404)
	if raw, err := c.Doc(ctx, "t", "x"); err != nil || field(t, raw, "n") != 6 {
		t.Fatalf("t/x after the aborted commit: %s %v, want the keyed batch's 6", raw, err)
	}
}

// TestSession_AbortedAndUnknownSessions: an aborted session refuses its
// commit and every step, typed, and applied nothing; aborting again
// answers it as it is; a session that does not exist is
// session_not_found.
func TestSession_AbortedAndUnknownSessions(t *testing.T) {
	s := startServer(t)
	c := s.client(t, idem.Options{})
	if _, err := c.CreateTable(ctx, "t", 0); err != nil {
		t.Fatal(err)
	}
	sess, err := c.BeginSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Stage(ctx, "t", map[string]any{"inserts": []any{map[string]any{"id": "y", "doc": map[string]any{}}}}); err != nil {
		t.Fatal(err)
	}
	info, err := sess.Abort(ctx)
	if err != nil || info.State != idemapi.SessionStateAborted || info.Reason != idemapi.SessionReasonAborted || info.RetainedUntil.IsZero() {
		t.Fatalf("abort: %+v %v", info, err)
	}
	if again, err := sess.Abort(ctx); err != nil || again.State != idemapi.SessionStateAborted {
		t.Fatalf("abort again: %+v %v", again, err)
	}
	_, err = sess.Commit(ctx, nil)
	if e := wantProblem(t, "the commit of an aborted session", err, idem.ErrSessionAborted, 409); e.Retryable {
		t.Fatalf("session_aborted is retryable: %+v", e)
	}
	_, err = sess.Stage(ctx, "t", map[string]any{"deletes": []any{"y"}})
	wantProblem(t, "a stage on an aborted session", err, idem.ErrSessionAborted, 409)
	_, err = sess.Get(ctx, "t", "y")
	wantProblem(t, "a read through an aborted session", err, idem.ErrSessionAborted, 409)
	_, err = c.Doc(ctx, "t", "y")
	wantProblem(t, "t/y of the aborted session", err, idem.ErrDocumentNotFound, 404)

	gone := c.Session("s" + "0123456789abcdef0123456789abcdef")
	_, err = gone.Info(ctx)
	wantProblem(t, "the info of an unknown session", err, idem.ErrSessionNotFound, 404)
	_, err = gone.Commit(ctx, nil)
	wantProblem(t, "the commit of an unknown session", err, idem.ErrSessionNotFound, 404)
	_, err = gone.Stage(ctx, "t", map[string]any{"deletes": []any{"y"}})
	wantProblem(t, "a stage on an unknown session", err, idem.ErrSessionNotFound, 404)
}

// TestRunSession_ANewSessionOnlyWhenOptedIn: a session whose commit
// aborts (a document it read changed meanwhile) answers retry
// new_session; RunSession returns that answer by default, and with
// Options.ConflictRetries runs the work again in a new session, which
// reads the new value and commits.
func TestRunSession_ANewSessionOnlyWhenOptedIn(t *testing.T) {
	s := startServer(t)
	for _, retries := range []int{0, 1} {
		c := s.client(t, idem.Options{ConflictRetries: retries, Backoff: func(int) time.Duration { return time.Millisecond }})
		tbl := "t" + string(rune('0'+retries))
		if _, err := c.CreateTable(ctx, tbl, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Batch(ctx, tbl, map[string]any{"inserts": []any{map[string]any{"id": "x", "doc": map[string]any{"n": 1}}}}, nil); err != nil {
			t.Fatal(err)
		}
		runs := 0
		res, err := c.RunSession(ctx, nil, nil, func(ctx context.Context, sess *idem.Session) error {
			runs++
			raw, err := sess.Get(ctx, tbl, "x")
			if err != nil {
				return err
			}
			n := field(t, raw, "n")
			if _, err := sess.Stage(ctx, tbl, map[string]any{"inserts": []any{map[string]any{"id": "x", "doc": map[string]any{"n": 10 * n}}}}); err != nil {
				return err
			}
			if runs == 1 { // someone else changes x before the first commit
				_, err = c.Batch(ctx, tbl, ops("x", "n", 1), nil)
			}
			return err
		})
		raw, derr := c.Doc(ctx, tbl, "x")
		if derr != nil {
			t.Fatal(derr)
		}
		switch retries {
		case 0:
			e := wantProblem(t, "RunSession without opting in", err, idem.ErrTransactionConflict, 409)
			if !e.NewSessionNeeded() || runs != 1 || field(t, raw, "n") != 2 {
				t.Fatalf("without opting in: %+v, %d runs, x = %s", e, runs, raw)
			}
		case 1:
			if err != nil || res.Inserted != 1 || runs != 2 || field(t, raw, "n") != 20 {
				t.Fatalf("opted in: %+v %v, %d runs, x = %s; want a second session's commit of 10 × 2", res, err, runs, raw)
			}
		}
	}
}
