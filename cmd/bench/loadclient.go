package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The http suite's load generator (and the pg-http peer's, the same one).
// On two cores the client shares the CPU with the server it measures, so
// what the client costs per request is taken from the server: net/http's
// client hands every request to two goroutines of its connection (a write
// loop and a read loop) and allocates a Request, a Response and their
// headers. The lean client is what wrk or h2load are to a C server: one
// connection per worker, the request written with one write from a reused
// buffer, the answer parsed in place. -http-client=net measures with
// net/http's client instead (docs/benchmarks.md has both).
type loadClient interface {
	// do sends one request (body nil: none; key "": no Idempotency-Key)
	// and reads its whole answer into a; a.body is valid until the next do
	// with the same a.
	do(ctx context.Context, method, url string, body []byte, key string, a *loadAnswer) error
	closeIdle()
}

// loadAnswer is what the cases look at in a response.
type loadAnswer struct {
	status   int
	replayed bool // Idempotent-Replayed: true
	body     []byte
}

// loadAnswers keeps the answers of the closed loops' calls, so that reading
// one allocates nothing once its body buffer has grown.
var loadAnswers = sync.Pool{New: func() any { return new(loadAnswer) }}

// Bounds of the lean client.
const (
	// loadTimeout bounds one request: the connection's deadline is kept at
	// least this far ahead, or at the context's deadline if sooner.
	loadTimeout = time.Minute
	// loadHeaderBytesMax bounds one header line and loadHeadersMax their
	// number: an answer beyond either is an error, not a bigger buffer.
	loadHeaderBytesMax = 8 << 10
	loadHeadersMax     = 64
	// loadBodyBytesMax bounds an answer's body.
	loadBodyBytesMax = 64 << 20
)

func newLoadClient(kind, addr string, maxConc int) (loadClient, error) {
	switch kind {
	case "", "lean":
		return &leanClient{addr: addr, maxIdle: maxConc * 2}, nil
	case "net":
		tr := &http.Transport{
			MaxIdleConns:        maxConc * 2,
			MaxIdleConnsPerHost: maxConc * 2,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		}
		return &netClient{c: &http.Client{Transport: tr, Timeout: loadTimeout}, tr: tr}, nil
	}
	return nil, fmt.Errorf("-http-client %q: want lean or net", kind)
}

// leanClient speaks HTTP/1.1 with keep-alive to one address, one request
// at a time per connection.
type leanClient struct {
	addr    string // host:port
	maxIdle int

	mu   sync.Mutex
	idle []*leanConn
}

type leanConn struct {
	c        net.Conn
	r        *bufio.Reader
	w        []byte
	deadline time.Time
}

func (l *leanClient) do(ctx context.Context, method, url string, body []byte, key string, a *loadAnswer) error {
	path, ok := strings.CutPrefix(url, "http://"+l.addr)
	if !ok || !strings.HasPrefix(path, "/") {
		return fmt.Errorf("lean client for %s: cannot send to %s", l.addr, url)
	}
	c, err := l.get(ctx)
	if err != nil {
		return err
	}
	switch err := c.roundTrip(ctx, l.addr, method, path, body, key, a); {
	case err == nil:
		l.put(c)
		return nil
	case errors.Is(err, errConnClose):
		c.c.Close()
		return nil
	default:
		// No retry on another connection: a server that drops a kept-alive
		// connection under the bench is a finding, not noise.
		c.c.Close()
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
}

func (l *leanClient) get(ctx context.Context) (*leanConn, error) {
	l.mu.Lock()
	if n := len(l.idle); n > 0 {
		c := l.idle[n-1]
		l.idle = l.idle[:n-1]
		l.mu.Unlock()
		return c, nil
	}
	l.mu.Unlock()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", l.addr)
	if err != nil {
		return nil, err
	}
	return &leanConn{c: nc, r: bufio.NewReaderSize(nc, 16<<10)}, nil
}

func (l *leanClient) put(c *leanConn) {
	l.mu.Lock()
	if len(l.idle) < l.maxIdle {
		l.idle = append(l.idle, c)
		c = nil
	}
	l.mu.Unlock()
	if c != nil {
		c.c.Close()
	}
}

func (l *leanClient) closeIdle() {
	l.mu.Lock()
	idle := l.idle
	l.idle = nil
	l.mu.Unlock()
	for _, c := range idle {
		c.c.Close()
	}
}

// errConnClose: the server said it closes the connection (or gave no
// length), so the answer was read to EOF and the connection is spent.
var errConnClose = errors.New("connection closed by the server after the loadAnswer")

func (c *leanConn) roundTrip(ctx context.Context, host, method, path string, body []byte, key string, a *loadAnswer) error {
	now := time.Now()
	want := now.Add(loadTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(want) {
		want = d
	}
	// Moving a deadline costs a timer update; keep it at least half the
	// timeout ahead instead of moving it every request.
	if c.deadline.Sub(now) < loadTimeout/2 || want.Before(c.deadline) {
		if err := c.c.SetDeadline(want); err != nil {
			return err
		}
		c.deadline = want
	}
	w := append(c.w[:0], method...)
	w = append(w, ' ')
	w = append(w, path...)
	w = append(w, " HTTP/1.1\r\nHost: "...)
	w = append(w, host...)
	w = append(w, "\r\nUser-Agent: idem-bench\r\n"...)
	if body != nil {
		w = append(w, "Content-Type: application/json\r\n"...)
	}
	if key != "" {
		w = append(w, "Idempotency-Key: "...)
		w = append(w, key...)
		w = append(w, "\r\n"...)
	}
	if body != nil || method == http.MethodPost {
		w = append(w, "Content-Length: "...)
		w = strconv.AppendInt(w, int64(len(body)), 10)
		w = append(w, "\r\n"...)
	}
	w = append(w, "\r\n"...)
	w = append(w, body...)
	c.w = w
	if _, err := c.c.Write(w); err != nil {
		return err
	}
	err := c.readAnswer(method, a)
	if err == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// readAnswer parses the status line, the headers and the body.
func (c *leanConn) readAnswer(method string, a *loadAnswer) error {
	if err := c.readStatus(a); err != nil {
		return err
	}
	a.replayed, a.body = false, a.body[:0]
	f, err := c.readHeaders(a)
	if err != nil {
		return err
	}
	if err := c.readBody(method, a, f); err != nil {
		return err
	}
	if f.closing {
		return errConnClose
	}
	return nil
}

// readStatus parses the status line into a.status.
func (c *leanConn) readStatus(a *loadAnswer) error {
	line, err := c.line()
	if err != nil {
		return err
	}
	proto, rest, _ := bytes.Cut(line, []byte(" "))
	code, _, _ := bytes.Cut(rest, []byte(" "))
	if !bytes.HasPrefix(proto, []byte("HTTP/1.")) || len(code) != 3 {
		return fmt.Errorf("malformed status line %.100q", line)
	}
	if a.status, err = strconv.Atoi(string(code)); err != nil {
		return fmt.Errorf("malformed status line %.100q", line)
	}
	return nil
}

// framing is what the headers say about the body and the connection.
type framing struct {
	length           int64 // Content-Length; -1 when absent
	chunked, closing bool
}

// readHeaders reads at most loadHeadersMax header lines, keeping the
// framing and Idempotent-Replayed.
func (c *leanConn) readHeaders(a *loadAnswer) (framing, error) {
	f := framing{length: -1}
	for n := 0; ; n++ {
		if n == loadHeadersMax {
			return f, fmt.Errorf("more than %d header lines", loadHeadersMax)
		}
		h, err := c.line()
		if err != nil {
			return f, err
		}
		if len(h) == 0 {
			return f, nil
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return f, fmt.Errorf("malformed header line %.100q", h)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if f.length, err = strconv.ParseInt(string(value), 10, 64); err != nil || f.length < 0 {
				return f, fmt.Errorf("malformed Content-Length %.100q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			f.chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			f.closing = bytes.EqualFold(value, []byte("close"))
		case bytes.EqualFold(name, []byte("Idempotent-Replayed")):
			a.replayed = bytes.Equal(value, []byte("true"))
		}
	}
}

// readBody reads the body into a.body as the framing says, bounded by
// loadBodyBytesMax; a body that ends with the connection returns
// errConnClose.
func (c *leanConn) readBody(method string, a *loadAnswer, f framing) error {
	switch {
	case method == http.MethodHead || a.status == http.StatusNoContent || a.status == http.StatusNotModified:
		return nil
	case f.chunked:
		return c.readChunked(a)
	case f.length >= 0:
		if f.length > loadBodyBytesMax {
			return fmt.Errorf("loadAnswer of %d bytes, more than %d", f.length, loadBodyBytesMax)
		}
		a.body = grow(a.body, int(f.length))
		_, err := io.ReadFull(c.r, a.body)
		return err
	}
	b, err := io.ReadAll(io.LimitReader(c.r, loadBodyBytesMax+1))
	if err != nil {
		return err
	}
	if len(b) > loadBodyBytesMax {
		return fmt.Errorf("answer of more than %d bytes", loadBodyBytesMax)
	}
	a.body = append(a.body, b...)
	return errConnClose
}

func (c *leanConn) readChunked(a *loadAnswer) error {
	for {
		line, err := c.line()
		if err != nil {
			return err
		}
		size, _, _ := bytes.Cut(line, []byte(";"))
		n, err := strconv.ParseInt(string(bytes.TrimSpace(size)), 16, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("malformed chunk size %.100q", line)
		}
		if n == 0 {
			for { // trailers, then the blank line
				t, err := c.line()
				if err != nil {
					return err
				}
				if len(t) == 0 {
					return nil
				}
			}
		}
		if int64(len(a.body))+n > loadBodyBytesMax {
			return fmt.Errorf("chunked loadAnswer of more than %d bytes", loadBodyBytesMax)
		}
		start := len(a.body)
		a.body = grow(a.body, start+int(n))
		if _, err := io.ReadFull(c.r, a.body[start:]); err != nil {
			return err
		}
		if t, err := c.line(); err != nil || len(t) != 0 {
			return fmt.Errorf("chunk not followed by CRLF (%v)", err)
		}
	}
}

// line returns the next CRLF-terminated line without its terminator,
// valid until the next read.
func (c *leanConn) line() ([]byte, error) {
	b, err := c.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) || len(b) > loadHeaderBytesMax {
		return nil, fmt.Errorf("a header line longer than %d bytes", loadHeaderBytesMax)
	}
	if err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b[:len(b)-1], []byte("\r")), nil
}

// grow returns b with length n, reusing its array when it is big enough.
func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	return append(b[:cap(b)], make([]byte, n-cap(b))...)
}

// netClient is net/http's client, kept to measure with (-http-client=net).
type netClient struct {
	c  *http.Client
	tr *http.Transport
}

func (n *netClient) closeIdle() { n.tr.CloseIdleConnections() }

func (n *netClient) do(ctx context.Context, method, url string, body []byte, key string, a *loadAnswer) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := n.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	a.status, a.replayed = resp.StatusCode, resp.Header.Get("Idempotent-Replayed") == "true"
	buf := bytes.NewBuffer(a.body[:0])
	_, err = buf.ReadFrom(io.LimitReader(resp.Body, loadBodyBytesMax))
	a.body = buf.Bytes()
	return err
}
