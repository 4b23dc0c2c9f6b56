package idem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/idemdb/idem/sdk/go/idemapi"
)

// SessionOptions shape a session.
type SessionOptions struct {
	// TTL is how long the session lives unless it ends first, in whole
	// seconds rounded up (0: the server's default, 30 s; at most its
	// -session-ttl-max). An open session that outlives it is aborted.
	TTL time.Duration
	// Table is the session's first table. On a deployment of several
	// store shards the session lives on this table's shard and may use
	// only tables of that shard (others: ErrSessionCrossShard); "" sends
	// none. With one store it has no effect.
	Table string
}

// beginBody is POST /v1/sessions's body.
type beginBody struct {
	TTLSeconds *int   `json:"ttl_seconds,omitempty"`
	Table      string `json:"table,omitempty"`
}

// CommitOptions shape a session's commit.
type CommitOptions struct {
	// Key is the commit's Idempotency-Key; "" sends none, and the server
	// keys the commit by the session ID. A session has one commit: a
	// retry under any key replays it.
	Key string
	// Wait asks the server to wait up to this long (Prefer: wait, whole
	// seconds) for a commit in progress rather than answer 409.
	Wait time.Duration
}

// Session is an interactive session: batches staged on one or more
// tables, read back by the session alone, then applied all at once and
// exactly once by Commit — or not at all (Abort, or its TTL). Its methods
// are safe for concurrent use; the server runs one step of a session at a
// time.
type Session struct {
	c *Client
	// ID is the session's ID (s and 32 hex digits), as begin returned it.
	ID string
}

// SessionInfo is a session as the server reports it.
type SessionInfo struct {
	ID string
	// State is open, committed (its commit was requested; the commit is a
	// receipt) or aborted.
	State idemapi.SessionState
	// Reason is why an aborted session ended: aborted, expired or
	// owner_lost ("" otherwise).
	Reason               idemapi.SessionReason
	CreatedAt, ExpiresAt time.Time
	// Stages is the steps staged; Documents and Writes the documents the
	// open session read or wrote, and wrote.
	Stages, Documents, Writes int
	// Result is what its staged batches did, summed.
	Result idemapi.BatchResult
	// CommitKey and TransactionID name a committed session's commit
	// (State committed: its commit was asked for); CommitOutcome says how
	// it ended — committed, aborted, not_applied, or pending — and
	// CommitCode why, when it did not commit.
	CommitKey, TransactionID string
	CommitOutcome            string
	CommitCode               idemapi.ErrorCode
	// RetainedUntil: an ended session is kept until then (zero while open).
	RetainedUntil time.Time
	// Staged is, in a Stage or StageTables answer only, what each table's
	// batch of the step did, in the order of their tables' names.
	Staged []idemapi.StagedBatch
}

// BeginSession begins an interactive session (o nil: the defaults).
// Begin is retried as an idempotent call: a retry after a lost answer may
// leave a session unused, which its TTL ends.
func (c *Client) BeginSession(ctx context.Context, o *SessionOptions) (*Session, error) {
	var body beginBody
	if o != nil && o.TTL > 0 {
		ttl := int(math.Ceil(o.TTL.Seconds()))
		body.TTLSeconds = &ttl
	}
	if o != nil {
		body.Table = o.Table
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("idem: begin: %w", err)
	}
	var info *SessionInfo
	err = c.retry(ctx, retryIdempotent, func() (*http.Response, error) {
		return c.api.BeginSessionWithBody(ctx, "application/json", bytes.NewReader(b))
	}, func(_ *http.Response, b []byte) (err error) {
		info, err = sessionInfoOf(b)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.Session(info.ID), nil
}

// Session is a handle on session id, begun earlier — by this process or
// another: Commit through it learns a commit's outcome after a crash. It
// sends nothing.
func (c *Client) Session(id string) *Session { return &Session{c: c, ID: id} }

// Stage stages batch — anything that marshals to the API's Batch, as
// Client.Batch takes — on table as one step: validated and computed at
// once on the session's view (its own writes over the committed state),
// visible to nobody else before the commit. A refused batch leaves the
// session as it was.
//
// A step is not idempotent and has no key: it is retried only when the
// server answers that it did not run it (429 overloaded). After a
// transport error, or a 5xx, whether the step was taken is unknown: Info's
// Stages says.
func (s *Session) Stage(ctx context.Context, table string, batch any) (*SessionInfo, error) {
	raw, err := json.Marshal(batch)
	if err != nil {
		return nil, fmt.Errorf("idem: stage: %w", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("idem: stage: a batch must marshal to a JSON object, not %.100s", raw)
	}
	m["table"], _ = json.Marshal(table)
	return s.stage(ctx, m)
}

// StageTables stages several tables' batches (table name → batch) as one
// step, all or none, in the order of the tables' names; as Stage.
func (s *Session) StageTables(ctx context.Context, batches map[string]any) (*SessionInfo, error) {
	return s.stage(ctx, map[string]any{"tables": batches})
}

func (s *Session) stage(ctx context.Context, req any) (*SessionInfo, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("idem: stage: %w", err)
	}
	var info *SessionInfo
	err = s.c.retry(ctx, retryUnapplied, func() (*http.Response, error) {
		return s.c.api.StageSessionWithBody(ctx, s.ID, nil, "application/json", bytes.NewReader(body))
	}, func(_ *http.Response, b []byte) (err error) {
		info, err = sessionInfoOf(b)
		return err
	})
	return info, err
}

// Get returns document id of table as the session sees it: its own write
// if it made one, else the committed document — whose version the session
// records, so that its commit is a transaction_conflict if the document
// changes meanwhile.
func (s *Session) Get(ctx context.Context, table, id string) (json.RawMessage, error) {
	var doc json.RawMessage
	err := s.c.retry(ctx, retryIdempotent, func() (*http.Response, error) {
		return s.c.api.ReadSessionDoc(ctx, s.ID, table, id, nil)
	}, func(_ *http.Response, b []byte) (err error) {
		doc, err = docOf(b)
		return err
	})
	return doc, err
}

// Info returns the session as stored.
func (s *Session) Info(ctx context.Context) (*SessionInfo, error) {
	var info *SessionInfo
	err := s.c.retry(ctx, retryIdempotent, func() (*http.Response, error) {
		return s.c.api.GetSession(ctx, s.ID)
	}, func(_ *http.Response, b []byte) (err error) {
		info, err = sessionInfoOf(b)
		return err
	})
	return info, err
}

// Commit applies everything the session staged, exactly once, conditioned
// on every document version it saw (o nil: the defaults). It is a keyed
// call, retried as Client.Batch is, and answers as one: a Result —
// Replayed for a retry — or an *Error with its outcome, such as
// ErrTransactionConflict (aborted: a document the session saw changed) or
// ErrSessionAborted (the session ended before its commit was asked).
func (s *Session) Commit(ctx context.Context, o *CommitOptions) (*Result, error) {
	if o == nil {
		o = &CommitOptions{}
	}
	params := &idemapi.CommitSessionParams{Prefer: preferWait(o.Wait)}
	key := s.ID
	if o.Key != "" {
		key = o.Key
		params.IdempotencyKey = &key
	}
	return s.c.keyed(ctx, key, func() (*http.Response, error) {
		return s.c.api.CommitSession(ctx, s.ID, params, idemapi.CommitSessionJSONRequestBody{})
	})
}

// Abort ends the session without a commit: nothing it staged applies.
// Aborting an aborted session answers it as it is; a committed one is
// ErrSessionCommitted.
func (s *Session) Abort(ctx context.Context) (*SessionInfo, error) {
	var info *SessionInfo
	err := s.c.retry(ctx, retryIdempotent, func() (*http.Response, error) {
		return s.c.api.AbortSession(ctx, s.ID, nil)
	}, func(_ *http.Response, b []byte) (err error) {
		info, err = sessionInfoOf(b)
		return err
	})
	return info, err
}

// sessionInfoOf reads a session answer (a stage step's has Staged).
func sessionInfoOf(b []byte) (*SessionInfo, error) {
	var s idemapi.Session
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("idem: session answer: %w", err)
	}
	info := &SessionInfo{ID: s.SessionId, State: s.State, CreatedAt: s.CreatedAt, ExpiresAt: s.ExpiresAt,
		Stages: s.Stages, Documents: s.Documents, Writes: s.Writes, Result: s.Result}
	if s.Reason != nil {
		info.Reason = *s.Reason
	}
	if s.Commit != nil {
		info.CommitKey, info.TransactionID = s.Commit.IdempotencyKey, s.Commit.TransactionId
		// Members newer than the generated layer, read apart.
		var extra struct {
			Commit struct {
				Outcome string `json:"outcome"`
				Code    string `json:"code"`
			} `json:"commit"`
		}
		_ = json.Unmarshal(b, &extra)
		info.CommitOutcome, info.CommitCode = extra.Commit.Outcome, idemapi.ErrorCode(extra.Commit.Code)
	}
	if s.RetainedUntil != nil {
		info.RetainedUntil = *s.RetainedUntil
	}
	if s.Staged != nil {
		info.Staged = *s.Staged
	}
	return info, nil
}

// RunSession runs fn in a new session and commits what it staged (so nil:
// the defaults; co as for Commit). If fn fails, the session is aborted and
// fn's error returned. A commit that answers retry new_session (aborted:
// a document the session saw changed; or not applied) can be tried again
// only in a new session: with Options.ConflictRetries positive (opt-in),
// RunSession begins one and runs fn again, at most that many times — fn
// must therefore stage from what it reads in the session it is given.
// Retries commit under the new session's ID (co.Key, bound to the first
// session's commit, would be a mismatch).
func (c *Client) RunSession(ctx context.Context, so *SessionOptions, co *CommitOptions, fn func(context.Context, *Session) error) (*Result, error) {
	for n := 0; ; n++ {
		s, err := c.BeginSession(ctx, so)
		if err != nil {
			return nil, err
		}
		if err := fn(ctx, s); err != nil {
			_, _ = s.Abort(ctx)
			return nil, err
		}
		res, err := s.Commit(ctx, co)
		var e *Error
		if !errors.As(err, &e) || !e.NewSessionNeeded() || n >= c.opts.ConflictRetries {
			return res, err
		}
		if werr := c.pause(ctx, n+1); werr != nil {
			return nil, errors.Join(werr, err)
		}
		if co != nil && co.Key != "" {
			co = &CommitOptions{Wait: co.Wait}
		}
	}
}
