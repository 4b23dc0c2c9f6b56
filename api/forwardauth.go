package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemdb/idem/store"
)

// Authentication between nodes. A node forwards a request signed with the
// cluster's shared secret (Forwarding.Secret); the node it reaches
// accepts it as forwarded only with a valid, recent signature, and signs
// its answer for that very request. A client cannot pass for a node: the
// internal request headers are stripped at the edge (dispatch) unless the
// signature holds, and the request is then served as the client's.
//
// A request's signature, in headerForwardSignature as t=<unix>,v1=<hex>,
// is HMAC-SHA256 over the method, the request URI, the SHA-256 of the
// body, the unix time and the forwarding node's ID. An answer's, in
// headerAnswerSignature as v1=<hex>, covers the request's signature, the
// status, the answering owner (headerAnsweredBy: node#incarnation), the
// Content-Type and the Idem-Transaction-Id. Within the skew window a
// captured request could be sent again: it is a request its client could
// send again as well, and keyed requests are idempotent.

const (
	// ClusterSecretBytesMin is the shortest cluster secret taken: 256
	// bits, HMAC-SHA256's own strength.
	ClusterSecretBytesMin = 32
	// headerForwardSignature carries a forwarded request's signature.
	headerForwardSignature = "Idem-Forward-Signature"
	// headerAnsweredBy names, on an answer to a forwarded request, the
	// owner (node#incarnation) that gave it; on a sharded deployment the
	// process's owner on every store shard, space-separated (node IDs
	// hold no space), since the answer is signed before it is routed.
	headerAnsweredBy = "Idem-Answered-By"
	// headerAnswerSignature carries the signature of such an answer.
	headerAnswerSignature = "Idem-Answer-Signature"
	// forwardSkewMax is how far a forwarded request's time may be from
	// the receiver's clock, either way: the nodes' clocks may drift this
	// much, and a captured signature is no good for longer.
	forwardSkewMax = 60 * time.Second
)

// The signed texts' versions between nodes: a node verifies only the
// version it signs, so every node of a cluster must sign the same ones
// (docs/upgrading.md).
const (
	forwardFormat = "idem-forward-v1"
	answerFormat  = "idem-answer-v1"
)

// Formats are the wire formats between nodes this build signs and
// verifies (idemd -version prints them).
func Formats() []store.Format {
	return []store.Format{
		{Name: "forward signature", Writes: forwardFormat, Reads: []string{forwardFormat}},
		{Name: "answer signature", Writes: answerFormat, Reads: []string{answerFormat}},
	}
}

// internalHeaders are the request fields only a node may send.
var internalHeaders = []string{headerForwardedBy, headerForwardSignature}

// requestMAC is a forwarded request's signature.
func requestMAC(secret []byte, method, uri string, body []byte, unix int64, node string) []byte {
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, forwardFormat+"\n%s\n%s\n%x\n%d\n%s", method, uri, sha256.Sum256(body), unix, node)
	return m.Sum(nil)
}

// answerMAC is the signature of an answer to the request signed reqMAC.
func answerMAC(secret, reqMAC []byte, status int, owner, contentType, txnID string) []byte {
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, answerFormat+"\n%x\n%d\n%s\n%s\n%s", reqMAC, status, owner, contentType, txnID)
	return m.Sum(nil)
}

// sign marks req (whose body is body) forwarded by this node at now and
// returns its signature.
func (f *forwarder) sign(req *http.Request, body []byte, now time.Time) []byte {
	unix := now.Unix()
	mac := requestMAC(f.secret, req.Method, req.URL.RequestURI(), body, unix, f.node)
	req.Header.Set(headerForwardedBy, f.node)
	req.Header.Set(headerForwardSignature, "t="+strconv.FormatInt(unix, 10)+",v1="+hex.EncodeToString(mac))
	return mac
}

// answerSigned reports whether resp carries the owner's signature of an
// answer to the request signed mac.
func (f *forwarder) answerSigned(resp *http.Response, mac []byte) bool {
	got, ok := strings.CutPrefix(resp.Header.Get(headerAnswerSignature), "v1=")
	sig, err := hex.DecodeString(got)
	if !ok || err != nil {
		return false
	}
	want := answerMAC(f.secret, mac, resp.StatusCode, resp.Header.Get(headerAnsweredBy), resp.Header.Get("Content-Type"), resp.Header.Get(headerTxnID))
	return hmac.Equal(sig, want)
}

// parseSignature reads t=<unix>,v1=<hex>.
func parseSignature(v string) (unix int64, mac []byte, ok bool) {
	ts, rest, ok1 := strings.Cut(v, ",")
	ts, ok2 := strings.CutPrefix(ts, "t=")
	hx, ok3 := strings.CutPrefix(rest, "v1=")
	if !ok1 || !ok2 || !ok3 {
		return 0, nil, false
	}
	unix, err1 := strconv.ParseInt(ts, 10, 64)
	mac, err2 := hex.DecodeString(hx)
	return unix, mac, err1 == nil && err2 == nil && len(mac) == sha256.Size
}

// forwardedKey is the context key of a request that proved a node
// forwarded it; its value is that node's forwarded (the request's
// signature and the node).
type forwardedKey struct{}

type forwarded struct {
	node string
	mac  []byte
}

// forwardedFrom is the node that forwarded the request of ctx, "" if it
// was not forwarded (or could not prove it).
func forwardedFrom(ctx context.Context) string {
	f, _ := ctx.Value(forwardedKey{}).(*forwarded)
	if f == nil {
		return ""
	}
	return f.node
}

// admitInternal runs at the edge, before routing: a request with internal
// headers is taken as forwarded only if their signature holds, and its
// answer is then signed; otherwise the headers are dropped, and it is a
// client's request like any other.
func (s *peers) admitInternal(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request) {
	present := false
	for _, h := range internalHeaders {
		_, in := r.Header[h]
		present = present || in
	}
	if !present {
		return w, r
	}
	from, why := s.verifyForwarded(r)
	for _, h := range internalHeaders {
		r.Header.Del(h)
	}
	if why != "" {
		s.metrics.forwardRefused(refusedRequest)
		s.opts.Logger.Debug("api: internal headers of a request no node signed were dropped; served as a client's", "why", why, "remote", r.RemoteAddr)
		return w, r
	}
	signer := &answerSigner{ResponseWriter: w, secret: s.forwarder.secret, owner: s.owners(), reqMAC: from.mac}
	return signer, r.WithContext(context.WithValue(r.Context(), forwardedKey{}, from))
}

// verifyForwarded checks r's signature; why says what failed. It reads
// the body to digest it, and puts back what it read.
func (s *peers) verifyForwarded(r *http.Request) (_ *forwarded, why string) {
	if s.forwarder == nil {
		return nil, "this node has no cluster secret"
	}
	node, sigs := r.Header.Get(headerForwardedBy), r.Header.Values(headerForwardSignature)
	if node == "" || len(sigs) != 1 {
		return nil, "no single signature and node"
	}
	unix, mac, ok := parseSignature(sigs[0])
	if !ok {
		return nil, "a malformed signature"
	}
	if skew := time.Since(time.Unix(unix, 0)); skew > forwardSkewMax || skew < -forwardSkewMax {
		return nil, "a signature outside the clock-skew window of " + forwardSkewMax.String()
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.opts.BodyBytesMax+1))
	rest := io.Reader(r.Body)
	if err != nil {
		rest = errReader{err}
	}
	r.Body = readCloser{io.MultiReader(bytes.NewReader(body), rest), r.Body}
	if err != nil || int64(len(body)) > s.opts.BodyBytesMax {
		return nil, "a body that could not be read whole"
	}
	uri := r.RequestURI
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	if !hmac.Equal(mac, requestMAC(s.forwarder.secret, r.Method, uri, body, unix, node)) {
		return nil, "a wrong signature"
	}
	return &forwarded{node: node, mac: mac}, ""
}

type readCloser struct {
	io.Reader
	io.Closer
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// answerSigner signs the answer to a forwarded request as its header is
// written: by then the status, Content-Type and Idem-Transaction-Id are
// set.
type answerSigner struct {
	http.ResponseWriter
	secret []byte
	owner  string
	reqMAC []byte
	signed bool
}

func (a *answerSigner) WriteHeader(status int) {
	if !a.signed {
		a.signed = true
		h := a.Header()
		h.Set(headerAnsweredBy, a.owner)
		mac := answerMAC(a.secret, a.reqMAC, status, a.owner, h.Get("Content-Type"), h.Get(headerTxnID))
		h.Set(headerAnswerSignature, "v1="+hex.EncodeToString(mac))
	}
	a.ResponseWriter.WriteHeader(status)
}

func (a *answerSigner) Write(b []byte) (int, error) {
	if !a.signed {
		a.WriteHeader(http.StatusOK)
	}
	return a.ResponseWriter.Write(b)
}

func (a *answerSigner) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// owners is headerAnsweredBy's value: this process's owner on each store
// shard, in the shard map's order.
func (s *peers) owners() string {
	names := make([]string, len(s.shards))
	for i, svc := range s.shards {
		names[i] = svc.Owner().String()
	}
	return strings.Join(names, " ")
}
