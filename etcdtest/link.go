package etcdtest

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/pkg/v3/proxy"
	"go.uber.org/zap"
)

// A Link is the TCP path between clients and one member, through a proxy
// (go.etcd.io/etcd/pkg/v3/proxy) that forwards each client connection to
// the member. Faults apply to connections already open and to new ones,
// in both directions, until Heal.
//
// A Link carries only client traffic; the members still reach each other,
// so a member behind a broken Link stays in the raft group and may lead it.
//
// While its member is stopped, a Link still accepts connections, and when
// it fails to reach the member it neither forwards nor closes them (the
// proxy's way), so a client sees a connection that hangs, not one that is
// refused, until its connect timeout: Client sets that to a second.
type Link struct {
	url url.URL // the proxy's, what clients dial
	srv proxy.Server

	mu sync.Mutex // orders fault changes, which touch several proxy settings
}

func newLink(to url.URL) (*Link, error) {
	p, err := freePort()
	if err != nil {
		return nil, err
	}
	from := url.URL{Scheme: "tcp", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(p))}
	// The proxy listens on all interfaces (it binds ":port"), not only on
	// loopback; it has no option to do otherwise.
	srv := proxy.NewServer(proxy.ServerConfig{
		Logger: zap.NewNop(),
		From:   from,
		To:     url.URL{Scheme: "tcp", Host: to.Host},
	})
	select {
	case <-srv.Ready():
	case <-srv.Done():
		// NewServer reports a failed listen on Error and closes itself.
		select {
		case err := <-srv.Error():
			return nil, fmt.Errorf("proxy for %s: %w", to.Host, err)
		default:
			return nil, fmt.Errorf("proxy for %s: closed", to.Host)
		}
	}
	// The proxy reports every failed dial and broken connection on a
	// channel of 16, and stops accepting once it is full: while the member
	// is down each connection attempt fails, so the channel must be
	// drained or the Link would stay broken after Restart.
	go func() {
		for {
			select {
			case <-srv.Error():
			case <-srv.Done():
				return
			}
		}
	}()
	return &Link{url: url.URL{Scheme: "http", Host: from.Host}, srv: srv}, nil
}

// NewLink is a Link to any TCP address host:port — a test puts one in
// front of an idemd node's listener to partition it from its peers. tb's
// Cleanup closes it.
func NewLink(tb testing.TB, to string) *Link {
	tb.Helper()
	l, err := newLink(url.URL{Host: to})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(l.close)
	return l
}

// URL is what dials through the link: http://127.0.0.1:port.
func (l *Link) URL() string { return l.url.String() }

// Cut breaks the link as a reset does: a request sent on a connection
// already open fails at once (gRPC code Unavailable), and the client's
// reconnections fail too. clientv3 then waits for a usable connection
// (WaitForReady), so a request begun once all its Links are cut fails at
// its deadline. Nothing sent after Cut reaches the member.
//
// The proxy cannot reset a connection, so Cut replaces every byte sent
// either way with bytes no HTTP/2 peer accepts (0xFF...: a frame larger
// than gRPC allows, even after a frame cut short), and the peer that reads
// them closes the connection. An idle connection stays open until it is
// next used.
func (l *Link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.srv.ModifyTx(garble)
	l.srv.ModifyRx(garble)
	// After the modifiers, so that bytes held by Blackhole are delivered
	// as they were sent, as a network would before it broke.
	l.srv.UnpauseTx()
	l.srv.UnpauseRx()
}

// Enough 0xFF that its first full frame header, however much of it
// completes a frame the peer was reading, declares a length (16 MiB) over
// the 16 KiB gRPC allows: a frame needs at most 9+16384 bytes to end.
var garbage = bytes.Repeat([]byte{0xff}, 2*(9+16384))

func garble([]byte) []byte { return garbage }

// Blackhole makes the link silent: connections stay open but nothing moves
// either way, so requests hang until their deadline, and a new connection
// hangs in its handshake. As with a real blackhole under TCP, nothing is
// lost, only held: after Heal the held bytes are delivered, so a request
// that timed out may still reach the member and be applied. (The proxy's
// own BlackholeTx/Rx would drop bytes from the middle of a TCP stream,
// which no network does, and would leave each connection's HTTP/2 framing
// corrupt after Heal.)
func (l *Link) Blackhole() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.srv.UnmodifyTx()
	l.srv.UnmodifyRx()
	l.srv.PauseTx()
	l.srv.PauseRx()
}

// Delay adds latency d to each direction, so a request and its response
// take at least 2d more; 0 removes it. The proxy waits d before forwarding
// each chunk it reads, one chunk at a time per connection and direction,
// and all of a client's requests to the member share one connection, so
// under load the delays queue up: expect throughput near one chunk per d.
func (l *Link) Delay(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d <= 0 {
		l.srv.UndelayTx()
		l.srv.UndelayRx()
		return
	}
	l.srv.DelayTx(d, 0)
	l.srv.DelayRx(d, 0)
}

// Heal removes every fault: Cut, Blackhole and Delay. Connections that a
// Cut broke stay broken; clients reconnect.
func (l *Link) Heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.srv.UnmodifyTx()
	l.srv.UnmodifyRx()
	l.srv.UndelayTx()
	l.srv.UndelayRx()
	l.srv.UnpauseTx()
	l.srv.UnpauseRx()
}

func (l *Link) close() { l.srv.Close() }
