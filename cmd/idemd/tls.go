package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
)

// tlsMinVersion is the oldest TLS idemd speaks, as a server and to its
// peers. 1.2, not 1.3: clients still in service (older JVMs, OpenSSL 1.0.x
// based tools, some proxies) stop at 1.2, and 1.2 as crypto/tls offers it
// by default has only forward-secret AEAD suites; 1.0 and 1.1 are refused
// (RFC 8996).
const tlsMinVersion = tls.VersionTLS12

// tlsConfigs are the TLS settings of a start: server is nil without
// -tls-cert (plain HTTP), peer is nil without -store etcd (no forwarding).
type tlsConfigs struct {
	server, peer *tls.Config
}

// loadTLS reads every TLS file the flags name, so that a missing or bad one
// stops the start, with the flag's name, before anything is opened.
func loadTLS(c config) (tlsConfigs, error) {
	var t tlsConfigs
	var err error
	if t.server, err = serverTLSConfig(c); err != nil {
		return t, err
	}
	if c.store != storeEtcd {
		return t, nil
	}
	var own []tls.Certificate
	if t.server != nil {
		own = t.server.Certificates
	}
	t.peer, err = peerTLSConfig(c, own)
	return t, err
}

// serverTLSConfig is the listener's TLS: -tls-cert/-tls-key, and with
// -tls-client-ca a client certificate that CA signed is required in the
// handshake. nil without -tls-cert.
func serverTLSConfig(c config) (*tls.Config, error) {
	if c.tlsCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
	if err != nil {
		// The error names the file when it is one of two that cannot be
		// opened: keep its path.
		return nil, fmt.Errorf("-tls-cert %s, -tls-key %s: %w", c.tlsCert, c.tlsKey, err)
	}
	cfg := &tls.Config{MinVersion: tlsMinVersion, Certificates: []tls.Certificate{cert}}
	if c.tlsClientCA == "" {
		return cfg, nil
	}
	if cfg.ClientCAs, err = loadPool("-tls-client-ca", c.tlsClientCA); err != nil {
		return nil, err
	}
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	if c.store == storeEtcd && !allowsClientAuth(cert.Leaf) {
		// Its peers require the same of it when it forwards: they would
		// refuse every forward in the handshake.
		return nil, fmt.Errorf("-tls-cert %s: with -tls-client-ca this node presents it to its peers when forwarding, "+
			"and it does not allow client authentication (extended key usage clientAuth)", c.tlsCert)
	}
	return cfg, nil
}

// peerTLSConfig is the forwarding client's TLS, used when a peer's
// -advertise is https: the peer is verified against -peer-ca (or the
// system's roots), and under mutual TLS (-tls-client-ca) this node
// presents own, its own -tls-cert, since every node requires one.
func peerTLSConfig(c config, own []tls.Certificate) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tlsMinVersion}
	if c.peerCA != "" {
		pool, err := loadPool("-peer-ca", c.peerCA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if c.tlsClientCA != "" {
		cfg.Certificates = own
	}
	return cfg, nil
}

// loadPool reads the PEM certificates of a CA file named by flag.
func loadPool(flag, path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, path, unwrapPath(err))
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s %s: no PEM certificate in it", flag, path)
	}
	return pool, nil
}

// allowsClientAuth reports whether leaf may authenticate a TLS client: no
// extended key usage at all means any.
func allowsClientAuth(leaf *x509.Certificate) bool {
	return leaf == nil || len(leaf.ExtKeyUsage) == 0 ||
		slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) || slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny)
}

// unwrapPath drops a *fs.PathError's path: the message names it already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// tlsSetting is the listener's TLS as the start-up log shows it.
func tlsSetting(c config) string {
	switch {
	case c.tlsClientCA != "":
		return "mutual (client certificates required)"
	case c.tlsCert != "":
		return "on"
	}
	return "off (plain HTTP)"
}
