// Package etcdtest runs a real etcd cluster inside the test process: several
// embedded members on loopback, each with its own data directory, so that
// tests and benchmarks exercise the same server, raft and client code paths
// as a deployment without a container or an etcd binary on the machine.
// With Options.MemberBinary each member is instead a process of its own
// (cmd/etcd-member), the same server with the same configuration, which a
// test binary under the race detector need not instrument.
//
// A member can be crashed and brought back (Stop, Restart), and with
// Options.Proxied the network between clients and each member can be cut,
// blackholed or slowed (Link). Peer traffic never goes through a Link: a
// Link models a client's view of the network, not a partition of the raft
// group, so quorum is lost only by stopping members.
//
// Prefix gives each test keys of its own, so that tests may share a
// cluster. Everything a Cluster starts is stopped by the test's Cleanup.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Options shape a cluster; the zero value is a three-member cluster with
// etcd's defaults.
type Options struct {
	// Members is the number of members; 0 means 3, the smallest cluster
	// that survives the loss of a member.
	Members int

	// MaxTxnOps, MaxRequestBytes and QuotaBackendBytes are etcd's limits of
	// the same names (--max-txn-ops, --max-request-bytes,
	// --quota-backend-bytes); 0 keeps etcd's default (128 operations,
	// 1.5 MiB, 2 GiB). Small values let a test reach a limit cheaply.
	MaxTxnOps         uint
	MaxRequestBytes   uint
	QuotaBackendBytes int64

	// AutoCompactionMode is "", "revision" or "periodic", and
	// AutoCompactionRetention its argument (a revision count, or a
	// duration such as "1s"), as etcd's --auto-compaction-* flags. Empty
	// means no automatic compaction, so old revisions stay readable until
	// the test compacts (CompactAndDefrag).
	AutoCompactionMode      string
	AutoCompactionRetention string

	// Proxied puts a TCP proxy in front of each member's client URL, so
	// the test can break the path between clients and that member (Link).
	// Endpoints then names the proxies, and members advertise them, so
	// clients that discover members keep going through the proxies.
	Proxied bool

	// TLS serves clients over TLS with certificates generated for the
	// cluster (a CA of its own; members require a client certificate):
	// Cluster.TLS names the files. Not with Proxied.
	TLS bool

	// Fsync makes members sync their WAL and backend as a deployment does.
	// It is off by default because a stopped member here is not a machine
	// crash: the page cache survives Stop, so syncing only costs time.
	// Benchmarks that want etcd's real write latency turn it on.
	Fsync bool

	// MemberBinary is the path of a member program (cmd/etcd-member,
	// RunMember): each member then runs as a process of its own, and Stop
	// kills it. A test binary built with -race then leaves etcd's server
	// uninstrumented (build the member without -race), which is most of
	// what an embedded cluster costs under the detector. Empty: members
	// run in this process.
	MemberBinary string
}

// Raft timing: half of etcd's defaults (100 ms heartbeat, 1 s election),
// so that losing a leader costs a test well under a second, yet wide enough
// that three members sharing two cores under the race detector do not miss
// heartbeats and elect spuriously.
const (
	tickMs     = 50
	electionMs = 500
)

// How long a member may take to become ready. Generous, because a slow
// machine must fail a test for a reason, not a timeout; a start on an idle
// machine takes well under a second.
const readyTimeout = 30 * time.Second

// A Cluster is a running set of embedded members.
type Cluster struct {
	opts    Options
	token   string
	initial string // --initial-cluster, the same on every (re)start
	log     *testLog
	members []*member
	tls     *TLSFiles // with Options.TLS
}

type member struct {
	name     string
	dir      string
	peer     url.URL
	client   url.URL // what the member listens on
	endpoint string  // what clients dial: client, or the Link's proxy
	link     *Link

	mu  sync.Mutex
	srv server // nil while stopped
}

// Start starts a cluster and returns once every member is ready and a
// leader is elected. It fails tb if the cluster does not come up.
func Start(tb testing.TB, o Options) *Cluster {
	tb.Helper()
	c, err := launch(tb.TempDir(), o, tb.Log)
	if err != nil {
		tb.Fatalf("etcdtest: start: %v", err)
	}
	tb.Cleanup(c.close)
	return c
}

// Launch starts a cluster outside a test — a benchmark, a demo — with its
// members' data under dir and their logs discarded. The caller stops it
// with Close.
func Launch(dir string, o Options) (*Cluster, error) {
	return launch(dir, o, nil)
}

// Close stops every member and proxy of a cluster from Launch.
func (c *Cluster) Close() { c.close() }

// NewClient is Client for callers without a testing.TB; the caller closes
// the client.
func (c *Cluster) NewClient() (*clientv3.Client, error) { return c.newClient(c.Endpoints()) }

func launch(dir string, o Options, logf func(...any)) (*Cluster, error) {
	if o.Members == 0 {
		o.Members = 3
	}
	c, err := start(dir, o, logf)
	if isAddrInUse(err) {
		// A port found free was taken before a member bound it: the
		// race in freePort. A second set of ports almost surely works.
		c, err = start(filepath.Join(dir, "retry"), o, logf)
	}
	return c, err
}

func start(dir string, o Options, logf func(...any)) (*Cluster, error) {
	c := &Cluster{
		opts:  o,
		token: fmt.Sprintf("etcdtest-%d-%d", os.Getpid(), clusters.Add(1)),
		log:   &testLog{logf: logf},
	}
	scheme := "http"
	if o.TLS {
		if o.Proxied {
			return nil, errors.New("etcdtest: Options.TLS and Proxied together are not supported")
		}
		files, err := writeTLS(filepath.Join(dir, "tls"))
		if err != nil {
			return nil, err
		}
		c.tls, scheme = &files, "https"
	}
	var initial []string
	for i := range o.Members {
		m := &member{name: fmt.Sprintf("m%d", i), dir: filepath.Join(dir, fmt.Sprintf("m%d", i))}
		pp, err1 := freePort()
		cp, err2 := freePort()
		if err := errors.Join(err1, err2); err != nil {
			c.close()
			return nil, err
		}
		m.peer = url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(pp))}
		m.client = url.URL{Scheme: scheme, Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(cp))}
		m.endpoint = m.client.String()
		if o.Proxied {
			l, err := newLink(m.client)
			if err != nil {
				c.close()
				return nil, err
			}
			m.link = l
			m.endpoint = l.url.String()
		}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peer.String())
	}
	c.initial = strings.Join(initial, ",")

	all := make([]int, len(c.members))
	for i := range all {
		all[i] = i
	}
	if err := c.run(all, embed.ClusterStateFlagNew); err != nil {
		c.close()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if _, err := c.Leader(ctx); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// launch starts m on its data directory; ready waits until it serves.
// state matters only to a member with an empty data directory; one
// restarting from its own data rejoins the cluster its WAL names.
func (c *Cluster) launch(m *member, state string) (server, error) {
	var (
		s   server
		err error
	)
	if c.opts.MemberBinary != "" {
		s, err = startProcess(c.opts.MemberBinary, c.spec(m, state), c.log)
	} else {
		s, err = startEmbedded(c.spec(m, state), c.log)
	}
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", m.name, err)
	}
	return s, nil
}

func (c *Cluster) ready(m *member, s server) error {
	if err := s.awaitReady(readyTimeout); err != nil {
		crash(s)
		return fmt.Errorf("member %s: %w", m.name, err)
	}
	m.mu.Lock()
	m.srv = s
	m.mu.Unlock()
	return nil
}

// run starts the members and waits until they are ready.
//
// One after another, because a new member first asks each peer whether it
// is part of the cluster already, and a peer whose listener is open but
// which is still starting (as all are when started together) answers
// nothing until the question times out, a second per peer. StartEtcd
// returns once the member serves, before it has a quorum, so the next
// member gets a prompt answer. Readiness needs a quorum, so it is awaited
// for all members together.
func (c *Cluster) run(members []int, state string) error {
	var errs []error
	started := make(map[int]server)
	for _, i := range members {
		s, err := c.launch(c.members[i], state)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		started[i] = s
	}
	if len(errs) > 0 {
		for _, s := range started {
			crash(s)
		}
		return errors.Join(errs...)
	}
	errs = make([]error, len(members))
	var wg sync.WaitGroup
	for k, i := range members {
		wg.Go(func() { errs[k] = c.ready(c.members[i], started[i]) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// TLS returns the certificate files of a cluster started with
// Options.TLS (nil otherwise).
func (c *Cluster) TLS() *TLSFiles { return c.tls }

// Endpoints returns the members' client URLs, in member order: the
// proxies' when the cluster is Proxied.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.endpoint
	}
	return eps
}

// Client returns a client of the given members, or of all of them when
// none is given; tb's Cleanup closes it. The client is lazy: it connects
// on first use, so it may be made while members are down.
func (c *Cluster) Client(tb testing.TB, members ...int) *clientv3.Client {
	tb.Helper()
	eps := c.Endpoints()
	if len(members) > 0 {
		eps = nil
		for _, i := range members {
			eps = append(eps, c.members[i].endpoint)
		}
	}
	return c.clientOn(tb, eps)
}

// ClientWith is a client of every member that also dials with opts: a
// test injects faults between the client and etcd with an interceptor
// (an ambiguous Txn that was never sent, say), closed when tb ends.
func (c *Cluster) ClientWith(tb testing.TB, opts ...grpc.DialOption) *clientv3.Client {
	tb.Helper()
	return c.clientOn(tb, c.Endpoints(), opts...)
}

func (c *Cluster) clientOn(tb testing.TB, eps []string, opts ...grpc.DialOption) *clientv3.Client {
	tb.Helper()
	cli, err := c.newClient(eps, opts...)
	if err != nil {
		tb.Fatalf("etcdtest: client: %v", err)
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

func (c *Cluster) newClient(eps []string, opts ...grpc.DialOption) (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:   eps,
		DialTimeout: 5 * time.Second,
		Logger:      c.log.logger().Named("client"),
		DialOptions: []grpc.DialOption{
			// gRPC's default reconnect backoff grows to two minutes;
			// a test that heals a Link or restarts a member wants the
			// client back within a fraction of a second.
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff: backoff.Config{
					BaseDelay:  50 * time.Millisecond,
					Multiplier: 1.6,
					Jitter:     0.2,
					MaxDelay:   250 * time.Millisecond,
				},
				// A Link whose member is down accepts a connection
				// and then leaves it silent (see Link), so a
				// connection attempt must give up soon.
				MinConnectTimeout: time.Second,
			}),
		},
	}
	cfg.DialOptions = append(cfg.DialOptions, opts...)
	if c.tls != nil {
		tc, err := transport.TLSInfo{CertFile: c.tls.ClientCert, KeyFile: c.tls.ClientKey, TrustedCAFile: c.tls.CA}.ClientConfig()
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	if c.opts.MaxRequestBytes > 0 {
		// Above the server's limit, so that an oversized request is
		// refused by etcd (ErrRequestTooLarge), as in production, and not
		// by the client's own default limit of 2 MiB.
		cfg.MaxCallSendMsgSize = int(c.opts.MaxRequestBytes) + 1<<20
	}
	return clientv3.New(cfg)
}

// Leader returns the index of the leader member, waiting for one to be
// elected until ctx ends. Only running members count: raft allows one
// leader per term, so the running member that leads in the highest term
// is the leader, and a stopped one can never be.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		best, term := -1, uint64(0)
		for i, m := range c.members {
			s := m.running()
			if s == nil {
				continue
			}
			if leads, t := s.leads(); leads && t >= term {
				best, term = i, t
			}
		}
		if best >= 0 {
			return best, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("etcdtest: no leader: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// running returns m's server, or nil when it is stopped or has stopped
// itself.
func (m *member) running() server {
	m.mu.Lock()
	s := m.srv
	m.mu.Unlock()
	if s == nil || s.stopped() {
		return nil
	}
	return s
}

// Running reports whether member i is up: started, and not stopped by Stop
// or by a fatal error of its own.
func (c *Cluster) Running(i int) bool { return c.members[i].running() != nil }

// Stop crashes member i: its raft loop halts at once, with no leadership
// transfer and no draining of requests, and then its listeners close, so
// its clients see their connections fail as if the process had died (with
// Options.MemberBinary it does die: SIGKILL). Its data directory stays, for
// Restart. Stopping a stopped member does nothing. An embedded member's
// Stop may take up to a second: etcd gives the connections of its peers
// that long to close.
func (c *Cluster) Stop(i int) {
	m := c.members[i]
	m.mu.Lock()
	s := m.srv
	m.srv = nil
	m.mu.Unlock()
	if s != nil {
		crash(s)
	}
}

// Restart starts the given members again, or every stopped member when
// none is given, each on its data directory and URLs as a process
// restarted after a crash, and waits until they are ready: rejoined and
// caught up enough to publish themselves. A member is ready only once a
// quorum runs, so after a majority crashed, restart at least a majority
// in one call.
func (c *Cluster) Restart(tb testing.TB, members ...int) {
	tb.Helper()
	if len(members) == 0 {
		for i := range c.members {
			if !c.Running(i) {
				members = append(members, i)
			}
		}
	}
	for _, i := range members {
		if c.Running(i) {
			tb.Fatalf("etcdtest: restart: member %d is running", i)
		}
		c.Stop(i) // releases a member that stopped on its own
	}
	if err := c.run(members, embed.ClusterStateFlagExisting); err != nil {
		tb.Fatalf("etcdtest: restart: %v", err)
	}
}

// CompactAndDefrag compacts the keyspace at the current revision,
// physically, and then defragments every running member, so that a test
// sees what a long-running cluster looks like after housekeeping: old
// revisions gone (rpctypes.ErrCompacted) and the backend rewritten. It
// talks to the members directly, not through their Links, so a fault on a
// Link does not stop it.
func (c *Cluster) CompactAndDefrag(ctx context.Context) error {
	var eps []string
	for _, m := range c.members {
		if m.running() != nil {
			eps = append(eps, m.client.String())
		}
	}
	if len(eps) == 0 {
		return errors.New("etcdtest: compact: no member is running")
	}
	cli, err := c.newClient(eps)
	if err != nil {
		return err
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("etcdtest: compact: current revision: %w", err)
	}
	rev := resp.Header.Revision
	_, err = cli.Compact(ctx, rev, clientv3.WithCompactPhysical())
	// Compacted already at rev: nothing was written since the last call.
	if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("etcdtest: compact at %d: %w", rev, err)
	}
	for _, ep := range eps {
		if _, err := cli.Defragment(ctx, ep); err != nil {
			return fmt.Errorf("etcdtest: defragment %s: %w", ep, err)
		}
	}
	return nil
}

// Link returns the path between clients and member i. It panics unless
// the cluster is Proxied: without a proxy there is no path to break.
func (c *Cluster) Link(i int) *Link {
	l := c.members[i].link
	if l == nil {
		panic("etcdtest: Link needs Options.Proxied")
	}
	return l
}

func (c *Cluster) close() {
	for _, m := range c.members {
		if m.link != nil {
			// So that no connection is held open by a fault while
			// the members close theirs.
			m.link.Heal()
		}
	}
	// Every raft loop first, so that members still running while others
	// close do not spend the time electing leaders.
	var live []server
	for _, m := range c.members {
		m.mu.Lock()
		if m.srv != nil {
			live = append(live, m.srv)
			m.srv = nil
		}
		m.mu.Unlock()
	}
	var wg sync.WaitGroup
	for _, s := range live {
		wg.Go(s.halt)
	}
	wg.Wait()
	for _, s := range live {
		wg.Go(s.close)
	}
	wg.Wait()
	for _, m := range c.members {
		if m.link != nil {
			m.link.close()
		}
	}
	c.log.stop()
}

var clusters, prefixes atomic.Int64

var unsafeKeyChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Prefix returns a key prefix no other call in this process returns, named
// after the test, so that tests sharing a cluster cannot see each other's
// keys and a key found in a dump names its test.
func Prefix(tb testing.TB) string {
	name := unsafeKeyChars.ReplaceAllString(tb.Name(), "_")
	return fmt.Sprintf("/idem-test/%s/%d/", name, prefixes.Add(1))
}
