package idem

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/idemdb/idem/sdk/go/idemapi"
)

// Bounds of the client's own behaviour.
const (
	// DefaultMaxRetries is Stripe's: a call is tried at most three times.
	DefaultMaxRetries = 2
	// backoffBase and backoffMax shape the wait before retry n (from 1):
	// backoffBase·(1+n²), at most backoffMax, jittered by ±25 %.
	backoffBase = 500 * time.Millisecond
	backoffMax  = 5 * time.Second
	// answerBytesMax bounds an answer read: an envelope or document.
	answerBytesMax = 8 << 20
)

// Options shape a Client.
type Options struct {
	// Token is the bearer token; "" sends none (a server without tokens).
	Token string
	// HTTPClient sends the requests (nil: http.DefaultClient). Its Timeout,
	// if any, bounds each attempt; the context bounds the whole call.
	HTTPClient *http.Client
	// MaxRetries bounds the retries of one call (0: DefaultMaxRetries;
	// negative: none).
	MaxRetries int
	// Backoff, if set, replaces the wait before retry n (from 1); the
	// server's Retry-After still wins when longer. Tests use it.
	Backoff func(n int) time.Duration
	// ConflictRetries, when positive, opts in to trying a batch again
	// under a new Idempotency-Key after a transaction_conflict abort
	// (outcome aborted, retry_with new_key: the server proved nothing
	// applied), at most this many times — and to RunSession beginning a
	// new session after a commit that answers retry new_session. Off by
	// default (0): the key's first answer stands, and deciding to send the
	// request again is the caller's. Each retry is a new request; the
	// Result's Key names the one that committed.
	ConflictRetries int
}

// Client talks to one idemd.
type Client struct {
	api  *idemapi.Client
	opts Options
}

// New returns a client of the server at baseURL (http://host:port).
func New(baseURL string, o Options) (*Client, error) {
	if o.MaxRetries == 0 {
		o.MaxRetries = DefaultMaxRetries
	}
	var copts []idemapi.ClientOption
	if o.HTTPClient != nil {
		copts = append(copts, idemapi.WithHTTPClient(o.HTTPClient))
	}
	if o.Token != "" {
		copts = append(copts, idemapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+o.Token)
			return nil
		}))
	}
	api, err := idemapi.NewClient(baseURL, copts...)
	if err != nil {
		return nil, err
	}
	return &Client{api: api, opts: o}, nil
}

// BatchOptions shape one keyed call.
type BatchOptions struct {
	// Key is the Idempotency-Key; "" makes one for this call.
	Key string
	// Wait asks the server to wait up to this long (Prefer: wait, whole
	// seconds) for a receipt in progress rather than answer 409.
	Wait time.Duration
	// FirstSent is when this key was first sent, sent on every attempt as
	// Repeatability-First-Sent; zero: the call's first attempt. A caller
	// that retries a key across calls (after a crash, from a queue) passes
	// the first call's time: a server restored from a backup then refuses
	// a key that may have executed before the restore (ErrKeyMayHaveExecuted)
	// instead of executing it again.
	FirstSent time.Time
}

// Result is a committed batch.
type Result struct {
	Inserted, Deleted, Transformed int
	// Replayed: the stored answer of an earlier execution.
	Replayed bool
	// TransactionID is the transaction the key is bound to.
	TransactionID string
	// Key is the Idempotency-Key the call used (the one it made, if so).
	Key string
}

// Batch sends batch — anything that marshals to the API's Batch (an
// idemapi.Batch, a map, json.RawMessage) — to table as one keyed,
// exactly-once call, retried as the package comment says. A problem is an
// *Error.
func (c *Client) Batch(ctx context.Context, table string, batch any, o *BatchOptions) (*Result, error) {
	if o == nil {
		o = &BatchOptions{}
	}
	body, err := json.Marshal(batch)
	if err != nil {
		return nil, fmt.Errorf("idem: batch: %w", err)
	}
	key := o.Key
	if key == "" {
		key = newKey()
	}
	first := o.FirstSent
	if first.IsZero() {
		first = time.Now()
	}
	for n := 0; ; n++ {
		sent := firstSentHeader(first)
		params := &idemapi.BatchParams{IdempotencyKey: &key, Prefer: preferWait(o.Wait), RepeatabilityFirstSent: &sent}
		res, err := c.keyed(ctx, key, func() (*http.Response, error) {
			return c.api.BatchWithBody(ctx, table, params, "application/json", bytes.NewReader(body))
		})
		if !conflictAborted(err) || n >= c.opts.ConflictRetries {
			return res, err
		}
		if werr := c.pause(ctx, n+1); werr != nil {
			return nil, errors.Join(werr, err)
		}
		key, first = newKey(), time.Now() // the opted-in retry: a new request
	}
}

// firstSentHeader is Repeatability-First-Sent's value for t: an HTTP-date,
// whole seconds, identical on every attempt of one key.
func firstSentHeader(t time.Time) string { return t.UTC().Format(http.TimeFormat) }

// pause waits the backoff before retry n, or until ctx ends.
func (c *Client) pause(ctx context.Context, n int) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(c.backoff(n)):
		return nil
	}
}

// keyed sends a keyed call under key (retried as the package comment
// says) and reads its committed answer.
func (c *Client) keyed(ctx context.Context, key string, send func() (*http.Response, error)) (*Result, error) {
	var res *Result
	err := c.retry(ctx, retryIdempotent, send, func(resp *http.Response, b []byte) error {
		var out idemapi.BatchResult
		if err := json.Unmarshal(b, &out); err != nil {
			return fmt.Errorf("idem: batch answer: %w", err)
		}
		res = &Result{Inserted: out.Inserted, Deleted: out.Deleted, Transformed: out.Transformed,
			Replayed: resp.Header.Get("Idempotent-Replayed") == "true", TransactionID: resp.Header.Get("Idem-Transaction-Id"), Key: key}
		return nil
	})
	return res, err
}

// preferWait is the Prefer header asking for a wait of d (whole seconds,
// rounded up), or nil for none.
func preferWait(d time.Duration) *string {
	if d <= 0 {
		return nil
	}
	prefer := "wait=" + strconv.Itoa(int(math.Ceil(d.Seconds())))
	return &prefer
}

// CreateTable creates table (shards 0: the server's default); created is
// false when it existed already.
func (c *Client) CreateTable(ctx context.Context, table string, shards int) (created bool, err error) {
	body := map[string]int{}
	if shards > 0 {
		body["shards"] = shards
	}
	b, _ := json.Marshal(body)
	err = c.retry(ctx, retryIdempotent, func() (*http.Response, error) {
		return c.api.PutTableWithBody(ctx, table, "application/json", bytes.NewReader(b))
	}, func(resp *http.Response, _ []byte) error {
		created = resp.StatusCode == http.StatusCreated
		return nil
	})
	return created, err
}

// Doc returns document id of table, as stored.
func (c *Client) Doc(ctx context.Context, table, id string) (json.RawMessage, error) {
	var doc json.RawMessage
	err := c.retry(ctx, retryIdempotent, func() (*http.Response, error) {
		return c.api.GetDoc(ctx, table, id)
	}, func(_ *http.Response, b []byte) (err error) {
		doc, err = docOf(b)
		return err
	})
	return doc, err
}

// docOf reads a document answer ({"id": …, "doc": …}).
func docOf(b []byte) (json.RawMessage, error) {
	var out struct {
		Doc json.RawMessage `json:"doc"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("idem: document answer: %w", err)
	}
	return out.Doc, nil
}

// retryPolicy says which failures of a call its retries cover.
type retryPolicy uint8

const (
	// retryIdempotent: a call that may be sent again — keyed (the same
	// request, so the same key: never a second application) or harmless
	// twice (a table, a document, a session read, an abort). Transport
	// errors and every problem whose retry_with is same_key (an unkeyed
	// answer: that is retryable) are retried.
	retryIdempotent retryPolicy = iota
	// retryUnapplied: a call that must not run twice and has no key (a
	// session's stage step). Only an answer that it did not run — 429
	// overloaded, refused before the step — is retried; after a transport
	// error or any other problem whether it ran may be unknown, and the
	// error is returned.
	retryUnapplied
)

// retries reports whether policy retries problem e.
func (p retryPolicy) retries(e *Error) bool {
	if p == retryUnapplied {
		return e.Code == idemapi.ErrorCodeOverloaded
	}
	// A keyed answer says how to retry; an unkeyed one only whether to.
	return e.RetryWith == "same_key" || e.RetryWith == "" && e.Retryable
}

// retry sends until an answer is final or the retries are spent: a 2xx
// goes to ok, a problem becomes an *Error, retried as policy says, and so
// is a transport error under retryIdempotent.
func (c *Client) retry(ctx context.Context, policy retryPolicy, send func() (*http.Response, error), ok func(*http.Response, []byte) error) error {
	for n := 0; ; n++ {
		resp, err := send()
		var wait time.Duration
		if err == nil {
			b, rerr := io.ReadAll(io.LimitReader(resp.Body, answerBytesMax))
			resp.Body.Close()
			switch {
			case rerr != nil:
				err = rerr
			case resp.StatusCode < 300:
				return ok(resp, b)
			default:
				perr := problemOf(resp, b)
				if !policy.retries(perr) {
					return perr
				}
				err = perr
				wait = retryAfter(resp)
			}
		}
		if _, answered := err.(*Error); policy == retryUnapplied && !answered {
			return err // the answer was lost: whether the call ran is unknown
		}
		if ctx.Err() != nil {
			return errors.Join(ctx.Err(), err)
		}
		if n >= c.opts.MaxRetries {
			return err
		}
		wait = max(wait, c.backoff(n+1))
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(wait): // the backoff between attempts
		}
	}
}

func (c *Client) backoff(n int) time.Duration {
	if c.opts.Backoff != nil {
		return c.opts.Backoff(n)
	}
	d := min(time.Duration(float64(backoffBase)*(1+float64(n*n))), backoffMax)
	return time.Duration(float64(d) * (0.75 + 0.5*mrand.Float64()))
}

// retryAfter is the answer's Retry-After in whole seconds (0 if none).
func retryAfter(resp *http.Response) time.Duration {
	s, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || s < 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}

func problemOf(resp *http.Response, b []byte) *Error {
	var p struct {
		Code          string `json:"code"`
		Detail        string `json:"detail"`
		Retryable     bool   `json:"retryable"`
		RetryWith     string `json:"retry_with"`
		Retry         string `json:"retry"`
		TransactionID string `json:"transaction_id"`
		Outcome       string `json:"outcome"`
	}
	if err := json.Unmarshal(b, &p); err != nil || p.Code == "" {
		return &Error{Status: resp.StatusCode, Code: idemapi.ErrorCodeInternal, Detail: fmt.Sprintf("not a problem answer: %.200s", b)}
	}
	return &Error{Status: resp.StatusCode, Code: idemapi.ErrorCode(p.Code), Detail: p.Detail, Retryable: p.Retryable,
		RetryWith: p.RetryWith, Retry: p.Retry, TransactionID: p.TransactionID, Outcome: p.Outcome}
}

// newKey is a fresh Idempotency-Key: 128 random bits, hex.
func newKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
