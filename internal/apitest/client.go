package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Transport is an http.RoundTripper that records every exchange (see
// Recorder; the contract module checks the records against the spec).
type Transport struct {
	Base http.RoundTripper // nil: http.DefaultTransport
	Rec  *Recorder
}

// RoundTrip implements http.RoundTripper. It buffers both bodies.
func (tr *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	base := tr.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(withBody(req, body))
	if err != nil {
		return nil, err
	}
	rb, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	tr.Rec.Record(Record{Method: req.Method, URI: req.URL.RequestURI(), RequestHeader: req.Header.Clone(), RequestBody: body,
		Status: resp.StatusCode, Header: resp.Header.Clone(), Body: rb})
	return resp, nil
}

// Recorded is how many exchanges the transport has recorded.
func (tr *Transport) Recorded() int64 { return tr.Rec.Recorded() }

// withBody returns a shallow copy of r (same context) reading body.
func withBody(r *http.Request, body []byte) *http.Request {
	c := r.Clone(r.Context())
	c.Body = io.NopCloser(bytes.NewReader(body))
	c.ContentLength = int64(len(body))
	c.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return c
}

// Client sends requests to one server through a recording Transport.
type Client struct {
	T     testing.TB
	Base  string // e.g. "http://127.0.0.1:8420"
	Token string // if set, sent as Authorization: Bearer unless a request sets Authorization
	HTTP  *http.Client
	Tr    *Transport
}

// NewClient returns a client for base whose every exchange is recorded.
func NewClient(t testing.TB, base string) *Client {
	tr := &Transport{Rec: newRecorder(t), Base: &http.Transport{
		Proxy:               nil,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
	}}
	t.Cleanup(func() { tr.Base.(*http.Transport).CloseIdleConnections() })
	return &Client{T: t, Base: strings.TrimRight(base, "/"), Tr: tr,
		HTTP: &http.Client{Transport: tr, Timeout: 60 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// WithBase returns a copy of c aimed at another server (same recorder).
func (c *Client) WithBase(base string) *Client {
	cc := *c
	cc.Base = strings.TrimRight(base, "/")
	return &cc
}

// WithToken returns a copy of c sending another bearer token.
func (c *Client) WithToken(token string) *Client {
	cc := *c
	cc.Token = token
	return &cc
}

// Response is a fully read response.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Try sends a request. body is nil, a string or a []byte (sent as
// application/json); headers are name, value pairs (a header given with an
// empty name list is not sent; give "Authorization", "" to send none).
func (c *Client) Try(method, path string, body any, headers ...string) (*Response, error) {
	var rd io.Reader
	var n int
	switch b := body.(type) {
	case nil:
	case string:
		rd, n = strings.NewReader(b), len(b)
	case []byte:
		rd, n = bytes.NewReader(b), len(b)
	default:
		return nil, fmt.Errorf("apitest: body of type %T", body)
	}
	req, err := http.NewRequest(method, c.Base+path, rd)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	if len(headers)%2 != 0 {
		return nil, fmt.Errorf("apitest: odd header list %q", headers)
	}
	auth := true
	for i := 0; i < len(headers); i += 2 {
		switch http.CanonicalHeaderKey(headers[i]) {
		case "Authorization":
			auth = false
			if headers[i+1] == "" {
				continue
			}
		case "Content-Type": // replaces the default; "" sends none
			req.Header.Del("Content-Type")
			if headers[i+1] == "" {
				continue
			}
		}
		req.Header.Add(headers[i], headers[i+1])
	}
	if auth && c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: rb}, nil
}

// Do is Try that fails the test on a transport error. Call it from the
// test's goroutine only (it may call T.Fatalf); use Try elsewhere.
func (c *Client) Do(method, path string, body any, headers ...string) *Response {
	c.T.Helper()
	r, err := c.Try(method, path, body, headers...)
	if err != nil {
		c.T.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// Problem is an RFC 9457 problem body with Idem's members.
type Problem struct {
	Type          string `json:"type"`
	Title         string `json:"title"`
	Status        int    `json:"status"`
	Detail        string `json:"detail"`
	Code          string `json:"code"`
	Retryable     bool   `json:"retryable"`
	RetryWith     string `json:"retry_with"`
	Outcome       string `json:"outcome"`
	TransactionID string `json:"transaction_id"`

	// Members lists the members present in the body.
	Members map[string]bool `json:"-"`
	// Keyed: the answer echoed an Idempotency-Key (and so must say
	// retry_with; an unkeyed answer must not).
	Keyed bool `json:"-"`
}

// Problem decodes r as a problem, failing the test unless the status is
// status, the Content-Type is application/problem+json and the body's
// status member equals the HTTP status.
func (r *Response) Problem(t testing.TB, status int) Problem {
	t.Helper()
	var p Problem
	if r.Status != status {
		t.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body %s", ct, r.Body)
	}
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("problem body %s: %v", r.Body, err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &members); err != nil {
		t.Fatalf("problem body %s: %v", r.Body, err)
	}
	p.Members = map[string]bool{}
	for m := range members {
		p.Members[m] = true
	}
	if p.Status != r.Status {
		t.Fatalf("problem status member %d, HTTP status %d", p.Status, r.Status)
	}
	_, p.Keyed = r.Header["Idempotency-Key"]
	if p.Keyed != p.Members["retry_with"] {
		t.Fatalf("retry_with present=%v on an answer with Idempotency-Key echo=%v: %s", p.Members["retry_with"], p.Keyed, r.Body)
	}
	return p
}

// JSON decodes r's body into v, failing the test unless the status is
// status and the Content-Type application/json.
func (r *Response) JSON(t testing.TB, status int, v any) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json; body %s", ct, r.Body)
	}
	if v != nil {
		if err := json.Unmarshal(r.Body, v); err != nil {
			t.Fatalf("body %s: %v", r.Body, err)
		}
	}
}

// TerminalOutcome is "committed", "aborted" or "not_applied" for a
// receipt's terminal keyed answer — one every retry with the same key gets
// again — and "" for anything such a retry may change: every answer that
// says to retry with the same key (in progress, overloaded, pending,
// unavailable, internal) is not stored. A 503 unavailable says not_applied
// truly, and the retry may then apply the batch.
func TerminalOutcome(r *Response) string {
	if r.Status == 201 {
		return "committed"
	}
	var p Problem
	if r.Header.Get("Content-Type") != "application/problem+json" || json.Unmarshal(r.Body, &p) != nil {
		return ""
	}
	if p.RetryWith == "same_key" {
		return ""
	}
	if p.Outcome == "aborted" || p.Outcome == "not_applied" {
		return p.Outcome
	}
	return ""
}
