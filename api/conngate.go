package api

import (
	"bytes"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemdb/idem/code"
)

// Connection admission (docs/design.md §15, "no client takes a node down"). Every
// connection costs a file descriptor, a goroutine and buffers; a flood of
// idle or slow ones once took the process's last descriptors, so /healthz
// went silent and the WAL could not open its next segment. The gate keeps
// the count below a cap that leaves the store its descriptors, and answers
// a connection past the cap at once, so that a client is never left hanging.

// ConnLimits bound the connections a server holds.
type ConnLimits struct {
	// Max bounds the connections open at once. The next one is answered
	// 503 overloaded with Retry-After and closed.
	Max int
	// IdleMax bounds the keep-alive connections idle at once: a connection
	// that goes idle beyond it is closed (its client reconnects when it
	// needs to), so idle ones cannot hold the room that active ones need.
	IdleMax int
	// TLS: the listener's connections speak TLS. A refusal is then a bare
	// close: an answer would need the handshake, the very work refused.
	TLS bool
}

const (
	// refusalRetryAfter is the Retry-After of a connection refused at the
	// cap: connections turn over in milliseconds to seconds.
	refusalRetryAfter = 1
	// refusalWriteTimeout bounds writing the refusal: it fits in any empty
	// socket buffer, so only a peer that is gone takes longer.
	refusalWriteTimeout = 100 * time.Millisecond
	// refusalReadTimeout and refusalReadBytes bound the wait for a refused
	// client's request head: a client sends it at once, a silent flood
	// never does.
	refusalReadTimeout = 200 * time.Millisecond
	refusalReadBytes   = 4 << 10
	// refusalDrainersMax bounds the refusals waiting for a request head at
	// once; beyond it a refusal is answered and closed at once.
	refusalDrainersMax = 64
)

// ConnGate admits connections under ConnLimits.
type ConnGate struct {
	limits   ConnLimits
	open     atomic.Int64
	idleMu   sync.Mutex
	idle     map[net.Conn]struct{}
	drainers chan struct{}
	refusal  []byte
	refused  atomic.Uint64
	idleCut  prometheus.Counter
}

// NewConnGate builds a gate whose counts are among s's metrics. Serve
// with its Listener, and set http.Server.ConnState to its ConnState.
func (s *Server) NewConnGate(l ConnLimits) *ConnGate {
	g := &ConnGate{limits: l, idle: map[net.Conn]struct{}{}, drainers: make(chan struct{}, refusalDrainersMax)}
	g.refusal = refusalAnswer(l.Max)
	refused := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "idem_refused_total", Help: refusedHelp,
		ConstLabels: prometheus.Labels{"kind": refusedConnections}}, func() float64 { return float64(g.refused.Load()) })
	g.idleCut = prometheus.NewCounter(prometheus.CounterOpts{Name: "idem_connections_idle_closed_total",
		Help: "Keep-alive connections closed on going idle because -max-idle-connections were idle already."})
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idem_connections_open",
		Help: "Client connections open now (at most -max-connections)."}, func() float64 { return float64(g.open.Load()) })
	idle := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idem_connections_idle",
		Help: "Keep-alive connections idle now (at most -max-idle-connections)."}, func() float64 { return float64(g.idleCount()) })
	s.metrics.reg.MustRegister(refused, g.idleCut, open, idle)
	return g
}

// refusalAnswer is the whole HTTP answer to a connection past the cap: 503
// (the node, not the client, is at its limit) with the code overloaded,
// whose registered status (429) is a client's own quota.
func refusalAnswer(max int) []byte {
	body := renderJSON(problem{Type: problemTypeBase + string(code.Overloaded), Title: title(code.Overloaded),
		Status: http.StatusServiceUnavailable, Code: string(code.Overloaded), Retryable: true,
		Detail: "the node holds " + strconv.Itoa(max) + " connections, its -max-connections; retry after the Retry-After seconds"})
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: ")
	b.WriteString(strconv.Itoa(len(body)))
	b.WriteString("\r\nContent-Type: " + problemContentType + "\r\nRetry-After: " + strconv.Itoa(refusalRetryAfter) + "\r\n\r\n")
	b.Write(body)
	return b.Bytes()
}

// Listener wraps ln (the plain TCP listener, beneath any TLS) so that at
// most Max of its connections are open at once.
func (g *ConnGate) Listener(ln net.Listener) net.Listener { return &gatedListener{Listener: ln, g: g} }

type gatedListener struct {
	net.Listener
	g *ConnGate
}

// Accept returns the next connection within the cap; the ones past it are
// answered and closed here, without returning to the server's loop.
func (l *gatedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.g.open.Add(1) <= int64(l.g.limits.Max) {
			return &gatedConn{Conn: c, g: l.g}, nil
		}
		l.g.open.Add(-1)
		l.g.refuse(c)
	}
}

// refuse answers c (unless it speaks TLS) and closes it. While fewer than
// refusalDrainersMax refusals are in hand, the answer waits briefly for
// the request's head: an HTTP client reads an answer that comes before
// its request as a broken connection, not as the 503 it is.
func (g *ConnGate) refuse(c net.Conn) {
	g.refused.Add(1)
	if g.limits.TLS {
		c.Close()
		return
	}
	select {
	case g.drainers <- struct{}{}:
		go g.answerAfterHead(c)
	default:
		g.answer(c)
		c.Close()
	}
}

// answerAfterHead reads what the refused client sends up to the end of a
// request head (bounded in time and bytes), answers, and closes. Reading
// also keeps the close from resetting the connection over unread bytes,
// which could discard the answer at the client.
func (g *ConnGate) answerAfterHead(c net.Conn) {
	defer func() { <-g.drainers }()
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(refusalReadTimeout))
	buf := make([]byte, refusalReadBytes)
	for n := 0; n < len(buf); {
		k, err := c.Read(buf[n:])
		n += k
		if err != nil || bytes.Contains(buf[:n], []byte("\r\n\r\n")) {
			break
		}
	}
	g.answer(c)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

func (g *ConnGate) answer(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(refusalWriteTimeout))
	_, _ = c.Write(g.refusal)
}

// gatedConn gives its place back when it closes, once.
type gatedConn struct {
	net.Conn
	g      *ConnGate
	closed atomic.Bool
}

func (c *gatedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.g.open.Add(-1)
	}
	return c.Conn.Close()
}

// ConnState is the http.Server's ConnState hook: it counts idle
// connections and closes one that goes idle past IdleMax.
func (g *ConnGate) ConnState(c net.Conn, st http.ConnState) {
	g.idleMu.Lock()
	if st != http.StateIdle {
		delete(g.idle, c)
		g.idleMu.Unlock()
		return
	}
	over := len(g.idle) >= g.limits.IdleMax
	if !over {
		g.idle[c] = struct{}{}
	}
	g.idleMu.Unlock()
	if over {
		g.idleCut.Inc()
		c.Close()
	}
}

func (g *ConnGate) idleCount() int {
	g.idleMu.Lock()
	defer g.idleMu.Unlock()
	return len(g.idle)
}
