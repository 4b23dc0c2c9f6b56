package api

import (
	"bytes"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/idemdb/idem/code"
)

// net/http answers a request it cannot parse itself, before any handler
// runs: a malformed request line or URI (400), headers beyond
// MaxHeaderBytes (431), an unknown transfer coding (501). It writes that
// answer straight to the connection as text/plain, in one write, always
// in this shape (net/http/server.go, conn.serve):
//
//	HTTP/1.1 <status> <text><serverErrorHeaders><body>
//
// Its header order is Content-Type before Connection, which a response
// written through a ResponseWriter never has (those headers are sorted),
// so the shape cannot be mistaken for one of ours.
const serverErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// malformedRoute labels the metrics of requests net/http could not parse.
const malformedRoute = "malformed"

// serverErrorCodes maps the statuses net/http answers by itself.
var serverErrorCodes = map[int]code.Code{
	400: code.InvalidRequest,
	431: code.HeadersTooLarge,
	501: code.NotImplemented,
}

// Listener wraps ln so that net/http's own answers to requests it cannot
// parse are problem details with a registered code, like every other
// answer, and are counted in the metrics. Serve the Server on it.
func (s *Server) Listener(ln net.Listener) net.Listener {
	return &problemListener{Listener: ln, srv: s}
}

type problemListener struct {
	net.Listener
	srv *Server
}

func (l *problemListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &problemConn{Conn: c, srv: l.srv}, nil
}

// problemConn rewrites net/http's plain-text error answers on the way out.
type problemConn struct {
	net.Conn
	srv *Server
}

func (c *problemConn) Write(b []byte) (int, error) {
	status, detail, ok := parseServerError(b)
	if !ok {
		return c.Conn.Write(b)
	}
	cd := serverErrorCodes[status]
	body := problemBody(cd, detail, false)
	var out bytes.Buffer
	out.Grow(len(body) + 160)
	out.WriteString("HTTP/1.1 ")
	status = code.Lookup(cd).Status
	out.WriteString(strconv.Itoa(status))
	out.WriteString(" ")
	out.WriteString(http.StatusText(status))
	out.WriteString("\r\nConnection: close\r\nContent-Length: ")
	out.WriteString(strconv.Itoa(len(body)))
	out.WriteString("\r\nContent-Type: " + problemContentType + "\r\n\r\n")
	out.Write(body)
	c.srv.metrics.observe(malformedRoute, status, 0)
	if _, err := c.Conn.Write(out.Bytes()); err != nil {
		return 0, err
	}
	return len(b), nil
}

// parseServerError recognises one of net/http's own error answers and
// returns its status and the text it gave.
func parseServerError(b []byte) (status int, detail string, ok bool) {
	const prefix = "HTTP/1.1 "
	if !bytes.HasPrefix(b, []byte(prefix)) || len(b) < len(prefix)+3 {
		return 0, "", false
	}
	i := bytes.Index(b, []byte(serverErrorHeaders))
	if i < 0 || bytes.IndexByte(b[:i], '\n') >= 0 {
		return 0, "", false
	}
	status, err := strconv.Atoi(string(b[len(prefix) : len(prefix)+3]))
	if err != nil {
		return 0, "", false
	}
	if _, known := serverErrorCodes[status]; !known {
		return 0, "", false
	}
	return status, serverErrorDetail(status, string(b[i+len(serverErrorHeaders):])), true
}

// serverErrorDetail turns net/http's body ("400 Bad Request: missing
// required Host header", or just the status line) into a problem detail.
func serverErrorDetail(status int, body string) string {
	if _, reason, ok := strings.Cut(body, ": "); ok {
		return "the request could not be parsed: " + reason
	}
	switch status {
	case 431:
		return "the request's header fields are too large"
	case 501:
		return "unsupported transfer encoding"
	}
	return "the request could not be parsed (request line, URI or header fields are malformed; a path needs valid %XX escapes)"
}
