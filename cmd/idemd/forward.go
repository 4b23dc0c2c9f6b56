package main

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/idemdb/idem/api"
)

// peerDialTimeout bounds connecting to a peer a request is forwarded to:
// a node that does not accept within it is treated as unreachable and the
// request answered here.
const peerDialTimeout = 2 * time.Second

// clusterSecretFileBytesMax bounds what is read of -cluster-secret-file:
// a secret is some dozens of bytes, never a file one mistook for it.
const clusterSecretFileBytesMax = 4 << 10

// forwarding is the API's forwarding to peers: on etcd, where other nodes
// hold receipts, and only with the cluster secret that authenticates it
// (secret nil: off, and said so); none on the local engine, where this
// process is alone. peerTLS is its TLS to peers that advertise https.
func forwarding(c config, secret []byte, peerTLS *tls.Config, log *slog.Logger) *api.Forwarding {
	if c.store != storeEtcd {
		return nil
	}
	if secret == nil {
		log.Warn("idemd: forwarding between nodes is off (no -cluster-secret-file): a request for a receipt another node holds waits here for its lease, "+
			"and a session step another node holds answers 503; to turn it on give every node the same -cluster-secret-file",
			"how", fmt.Sprintf("openssl rand -hex %d > FILE; chmod 600 FILE", api.ClusterSecretBytesMin))
		return nil
	}
	return &api.Forwarding{Node: c.node, Client: peerClient(peerTLS), Secret: secret}
}

// peerClient is the client requests are forwarded with: a dial bounded by
// peerDialTimeout, and no redirect ever followed (the API enforces that
// too: a redirect would carry the client's body and credentials to
// whatever it names). peerTLS (peerTLSConfig) is its TLS to peers that
// advertise https.
func peerClient(peerTLS *tls.Config) *http.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = (&net.Dialer{Timeout: peerDialTimeout}).DialContext
	transport.TLSClientConfig = peerTLS
	return &http.Client{Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// loadClusterSecret reads -cluster-secret-file: its bytes less a trailing
// line break, at least api.ClusterSecretBytesMin of them. A file others
// may read draws a warning: whoever reads it can pass for a node.
func loadClusterSecret(path string, log *slog.Logger) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the message already
		}
		return nil, fmt.Errorf("-cluster-secret-file %s: cannot open: %w", path, err)
	}
	defer f.Close()
	buf, err := io.ReadAll(io.LimitReader(f, clusterSecretFileBytesMax+1))
	if err != nil {
		return nil, fmt.Errorf("-cluster-secret-file %s: %w", path, err)
	}
	if len(buf) > clusterSecretFileBytesMax {
		return nil, fmt.Errorf("-cluster-secret-file %s: longer than %d bytes: not a secret", path, clusterSecretFileBytesMax)
	}
	secret := bytes.TrimRight(buf, "\r\n")
	if len(secret) < api.ClusterSecretBytesMin {
		return nil, fmt.Errorf("-cluster-secret-file %s: %d bytes, want at least %d (openssl rand -hex %d makes one)",
			path, len(secret), api.ClusterSecretBytesMin, api.ClusterSecretBytesMin)
	}
	if st, err := f.Stat(); err == nil && st.Mode().Perm()&0o077 != 0 {
		log.Warn("idemd: -cluster-secret-file is readable by others: whoever reads it can pass for a node (chmod 600)", "file", path, "mode", st.Mode().Perm().String())
	}
	return secret, nil
}
