package etcdstore

import (
	"fmt"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ClientOptions are how a tool reaches the cluster: idemd and idemctl take
// them from the same -etcd-* flags, so an operator's command line works
// for both.
type ClientOptions struct {
	Endpoints   []string
	DialTimeout time.Duration
	// CA turns TLS on; Cert and Key add a client certificate.
	CA, Cert, Key string
	// User authenticates with the password in PasswordFile (one line).
	User, PasswordFile string
}

// Config is the etcd client of o. Files that cannot be read are errors
// that name the flag they came from.
func (o ClientOptions) Config() (clientv3.Config, error) {
	cfg := clientv3.Config{Endpoints: o.Endpoints, DialTimeout: o.DialTimeout, Logger: zap.NewNop()}
	if o.CA != "" {
		tc, err := transport.TLSInfo{TrustedCAFile: o.CA, CertFile: o.Cert, KeyFile: o.Key}.ClientConfig()
		if err != nil {
			return cfg, fmt.Errorf("-etcd-ca/-etcd-cert/-etcd-key: %w", err)
		}
		cfg.TLS = tc
	}
	if o.User != "" {
		pw, err := os.ReadFile(o.PasswordFile)
		if err != nil {
			return cfg, fmt.Errorf("-etcd-password-file: %w", err)
		}
		cfg.Username, cfg.Password = o.User, strings.TrimRight(string(pw), "\r\n")
		if cfg.Password == "" {
			return cfg, fmt.Errorf("-etcd-password-file %s: empty", o.PasswordFile)
		}
	}
	return cfg, nil
}
