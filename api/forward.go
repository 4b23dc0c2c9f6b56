package api

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
)

// Forwarding (docs/design.md §14): a keyed request whose receipt another live node
// holds is sent on to that node, which finishes it or joins the work in
// flight, rather than polled for here until it is done.
//
//   - A closed channel: the forwarded request is signed with the cluster's
//     shared secret (forwardauth.go), and only an answer the owner signed
//     for that very request — from the node and incarnation the node
//     record named — is relayed. A redirect is never followed, and
//     anything else at the owner's address (another service, a stale
//     record) is treated as an unreachable owner.
//   - One hop at most: a request that proved it was forwarded is never
//     forwarded again, so no loop can form, whatever the nodes believe
//     about each other.
//   - The client's own credentials travel with it: every node of a
//     deployment reads the same tokens, so the owner authenticates the same
//     principal, and a node can make no request its client could not.
//   - Only a live owner is a target: its node record must name the very
//     incarnation that holds the claim (receipt.Service.Locate). A failed
//     forward — the owner unreachable, its answer unreadable or unproven —
//     is answered here as without forwarding, never from a guess.
type Forwarding struct {
	// Node is this node's ID, sent to the owner in headerForwardedBy.
	Node string
	// Client sends the forwarded requests (nil: a client of its own, never
	// http.DefaultClient). Its CheckRedirect is replaced: redirects are
	// never followed. The request's own context bounds each one.
	Client *http.Client
	// Secret is the cluster's shared secret, at least
	// ClusterSecretBytesMin bytes, the same on every node: it signs the
	// requests this node forwards and the answers it gives to forwarded
	// ones. Shorter, forwarding is off and forwarded requests are served as
	// clients'.
	Secret []byte
}

const (
	// headerForwardedBy marks a request one node forwarded to another,
	// naming the node that did.
	headerForwardedBy = "Idem-Forwarded-By"
	// headerServedBy names, on a forwarded answer, the node that gave it.
	headerServedBy = "Idem-Served-By"
	// forwardAnswerBytesMax bounds a forwarded answer read back: an
	// envelope, whatever the batch, is far below it.
	forwardAnswerBytesMax = 4 << 20
	// forwardSlack bounds a forwarded request beyond the wait it asked the
	// owner for: an owner that is partitioned away (its connections open
	// and silent) costs at most this, and the request is answered here.
	forwardSlack = 5 * time.Second
)

// forwardedHeaders are the request's fields the owner needs to answer it
// as if the client had asked it directly.
var forwardedHeaders = []string{"Authorization", "Content-Type", headerIdempotencyKey, "Prefer", headerFirstSent}

// relayedHeaders are the answer's fields relayed to the client: those
// idemd itself sets on its answers, and nothing else (no Set-Cookie, no
// hop-by-hop field, none of the internal ones).
var relayedHeaders = []string{"Content-Type", headerIdempotencyKey, headerReplayed, headerTxnID, headerKeyExpiry,
	headerRetryAfter, "Preference-Applied", "Location", "Allow", "WWW-Authenticate"}

// forwarder is Options.Forward once checked: nil when forwarding is off.
type forwarder struct {
	node   string
	client *http.Client
	secret []byte
}

// newForwarder checks f; nil (forwarding off) without a long enough
// secret.
func newForwarder(f *Forwarding) *forwarder {
	if f == nil || len(f.Secret) < ClusterSecretBytesMin {
		return nil
	}
	return &forwarder{node: f.Node, client: peerClient(f.Client), secret: bytes.Clone(f.Secret)}
}

// peerClient is c (or a client of its own) that never follows a
// redirect: a redirect would send the client's body and credentials to
// whatever the owner's address names.
func peerClient(c *http.Client) *http.Client {
	var out http.Client
	if c != nil {
		out = *c
	}
	out.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &out
}

// peers is this node's side of forwarding between nodes: sending a
// keyed request to the node that holds its receipt (forward), and
// admitting the requests other nodes forward here (forwardauth.go).
type peers struct {
	// forwarder forwards requests to their owners; nil: forwarding is off.
	forwarder *forwarder
	opts      *Options
	metrics   *metrics
	// shards are the store shards' services: this process's owner on
	// each signs its answers.
	shards []*receipt.Service
}

// mayForward reports whether r may be forwarded: forwarding is on and r
// was not forwarded already.
func (s *peers) mayForward(r *http.Request) bool {
	if fault.Planted(fault.BugForwardForwarded) { // planted only under -tags idem_selftest
		return s.forwarder != nil // planted bug: the forwarded mark is not checked
	}
	return s.forwarder != nil && forwardedFrom(r.Context()) == ""
}

// forward sends r, whose body is body, to the node of holder and relays
// its answer; txnID, if not empty, is the transaction the answer must be
// of. svc is the service of the request's store shard: the holder is
// located in that shard's node records, where its claim is. It reports
// false, having written nothing, when the request could not be forwarded
// or its answer not read or not proven the owner's.
func (s *peers) forward(w http.ResponseWriter, r *http.Request, svc *receipt.Service, body []byte, holder lease.Owner, wait time.Duration, txnID string) bool {
	f := s.forwarder
	base, err := svc.Locate(r.Context(), holder)
	if err != nil || base == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait+forwardSlack)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, strings.TrimSuffix(base, "/")+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return false
	}
	for _, h := range forwardedHeaders {
		if v := r.Header.Values(h); len(v) > 0 {
			req.Header[http.CanonicalHeaderKey(h)] = v
		}
	}
	mac := f.sign(req, body, time.Now())
	resp, err := f.client.Do(req)
	if err != nil {
		s.opts.Logger.Warn("api: forwarding to the receipt's owner failed; answering here", "owner", holder.String(), "to", base, "err", err)
		return false
	}
	defer resp.Body.Close()
	if why := f.unproven(resp, holder, mac, txnID); why != "" {
		s.metrics.forwardRefused(refusedAnswer)
		s.opts.Logger.Warn("api: the owner's address gave no answer of the owner's; answering here", "owner", holder.String(), "to", base,
			"status", resp.StatusCode, "why", why)
		return false
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, forwardAnswerBytesMax+1))
	if err != nil || len(answer) > forwardAnswerBytesMax {
		s.opts.Logger.Warn("api: the owner's answer to a forwarded request was unreadable; answering here", "owner", holder.String(), "err", err)
		return false
	}
	h := w.Header()
	for _, k := range relayedHeaders {
		if v := resp.Header.Values(k); len(v) > 0 {
			h[k] = v
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(answer)))
	h.Set(headerServedBy, holder.Node)
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
	return true
}

// unproven says why resp is not the owner's answer to the request signed
// with mac ("" when it is): a redirect, a body that is not an idemd
// answer, another node or incarnation, no valid signature of the
// owner's, or another transaction than txnID.
func (f *forwarder) unproven(resp *http.Response, holder lease.Owner, mac []byte, txnID string) string {
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return "a redirect, which is never followed"
	}
	ct := resp.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || (mt != "application/json" && mt != problemContentType) {
		return fmt.Sprintf("Content-Type %q is no idemd answer", ct)
	}
	if by := resp.Header.Get(headerAnsweredBy); !slices.Contains(strings.Fields(by), holder.String()) {
		return fmt.Sprintf("answered by %q, not by the holder", by)
	}
	if !f.answerSigned(resp, mac) {
		return "the answer's signature is missing or wrong"
	}
	if got := resp.Header.Get(headerTxnID); txnID != "" && got != txnID {
		return fmt.Sprintf("an answer of transaction %q, not of this request's", got)
	}
	return ""
}
