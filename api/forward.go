package api

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/idemdb/idem/lease"
)

// Forwarding (DESIGN §14): a keyed request whose receipt another live node
// holds is sent on to that node, which finishes it or joins the work in
// flight, rather than polled for here until it is done.
//
//   - One hop at most: a forwarded request carries headerForwardedBy and is
//     never forwarded again, so no loop can form, whatever the nodes
//     believe about each other.
//   - The client's own credentials travel with it: every node of a
//     deployment reads the same tokens, so the owner authenticates the same
//     principal, and a node can make no request its client could not.
//   - Only a live owner is a target: its node record must name the very
//     incarnation that holds the claim (receipt.Service.Locate). A failed
//     forward — the owner unreachable, its answer unreadable — is answered
//     here as without forwarding, never from a guess.
type Forwarding struct {
	// Node is this node's ID, sent to the owner in headerForwardedBy.
	Node string
	// Client sends the forwarded requests (nil: http.DefaultClient; the
	// request's own context bounds each one).
	Client *http.Client
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
var forwardedHeaders = []string{"Authorization", "Content-Type", headerIdempotencyKey, "Prefer"}

// mayForward reports whether r may be forwarded: forwarding is on and r
// was not forwarded already.
func (s *Server) mayForward(r *http.Request) bool {
	return s.opts.Forward != nil && r.Header.Get(headerForwardedBy) == ""
}

// forward sends r, whose body is body, to the node of holder and relays
// its answer. It reports false, having written nothing, when the request
// could not be forwarded or its answer not read.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, body []byte, holder lease.Owner, wait time.Duration) bool {
	base, err := s.svc.Locate(r.Context(), holder)
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
	req.Header.Set(headerForwardedBy, s.opts.Forward.Node)
	client := s.opts.Forward.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		s.opts.Logger.Warn("api: forwarding to the receipt's owner failed; answering here", "owner", holder.String(), "to", base, "err", err)
		return false
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, forwardAnswerBytesMax+1))
	if err != nil || len(answer) > forwardAnswerBytesMax {
		s.opts.Logger.Warn("api: the owner's answer to a forwarded request was unreadable; answering here", "owner", holder.String(), "err", err)
		return false
	}
	for k, v := range resp.Header {
		switch k {
		case "Content-Length", "Connection", "Date", "Transfer-Encoding", "Keep-Alive":
		default:
			w.Header()[k] = v
		}
	}
	w.Header().Set(headerServedBy, holder.Node)
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
	return true
}
