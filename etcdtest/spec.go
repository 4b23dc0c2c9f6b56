package etcdtest

import (
	"net/url"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// memberSpec is everything one start of a member needs: the embedded
// member's and, as JSON on its command line, a member process's (RunMember),
// so that both run the same configuration.
type memberSpec struct {
	Name, Dir string
	Peer      url.URL
	Client    url.URL // what the member listens on
	Advertise url.URL // what it tells clients: Client, or its Link's proxy
	TLS       *TLSFiles
	Initial   string // --initial-cluster, the same on every (re)start
	Token     string
	State     string // new or existing
	Fsync     bool

	MaxTxnOps, MaxRequestBytes uint
	QuotaBackendBytes          int64
	AutoCompactionMode         string
	AutoCompactionRetention    string
}

func (c *Cluster) spec(m *member, state string) memberSpec {
	s := memberSpec{Name: m.name, Dir: m.dir, Peer: m.peer, Client: m.client, Advertise: m.client,
		TLS: c.tls, Initial: c.initial, Token: c.token, State: state, Fsync: c.opts.Fsync,
		MaxTxnOps: c.opts.MaxTxnOps, MaxRequestBytes: c.opts.MaxRequestBytes,
		QuotaBackendBytes:  c.opts.QuotaBackendBytes,
		AutoCompactionMode: c.opts.AutoCompactionMode, AutoCompactionRetention: c.opts.AutoCompactionRetention}
	if m.link != nil {
		s.Advertise = m.link.url
	}
	return s
}

func (s memberSpec) config(log *zap.Logger) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = s.Name
	cfg.Dir = s.Dir
	cfg.ListenPeerUrls = []url.URL{s.Peer}
	cfg.AdvertisePeerUrls = []url.URL{s.Peer}
	cfg.ListenClientUrls = []url.URL{s.Client}
	cfg.AdvertiseClientUrls = []url.URL{s.Advertise}
	if s.TLS != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: s.TLS.ServerCert, KeyFile: s.TLS.ServerKey,
			TrustedCAFile: s.TLS.CA, ClientCertAuth: true}
	}
	cfg.InitialCluster = s.Initial
	// Unique per cluster, so that a member can never join another test's
	// cluster that happens to reuse its ports.
	cfg.InitialClusterToken = s.Token
	cfg.ClusterState = s.State
	cfg.TickMs = tickMs
	cfg.ElectionMs = electionMs
	cfg.UnsafeNoFsync = !s.Fsync
	// Clients speak gRPC; the HTTP gateway would only add a connection
	// from each member to itself.
	cfg.EnableGRPCGateway = false
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(log.Named(s.Name))
	if s.MaxTxnOps > 0 {
		cfg.MaxTxnOps = s.MaxTxnOps
	}
	if s.MaxRequestBytes > 0 {
		cfg.MaxRequestBytes = s.MaxRequestBytes
	}
	cfg.QuotaBackendBytes = s.QuotaBackendBytes
	if s.AutoCompactionMode != "" {
		cfg.AutoCompactionMode = s.AutoCompactionMode
		cfg.AutoCompactionRetention = s.AutoCompactionRetention
	}
	return cfg
}
