package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/idemdb/idem/internal/devcert"
)

// clusterTLS is what -tls (and -mtls) generated in <dir>/tls: a CA, one
// certificate every node serves and forwards with (127.0.0.1 and
// localhost, server and client auth), and under -mtls a client
// certificate for curl.
type clusterTLS struct {
	mutual                bool
	ca, cert, key         string
	clientCert, clientKey string
	client                *tls.Config // what this tool polls /healthz with
}

// writeClusterTLS generates the files into dir.
func writeClusterTLS(dir string, mutual bool) (*clusterTLS, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := devcert.NewCA("idem-cluster CA")
	if err != nil {
		return nil, err
	}
	t := &clusterTLS{mutual: mutual, ca: filepath.Join(dir, "ca.crt"), client: &tls.Config{RootCAs: ca.Pool()}}
	if err := ca.WriteCA(t.ca); err != nil {
		return nil, err
	}
	node, err := ca.Issue("idem-cluster node", devcert.Node)
	if err != nil {
		return nil, err
	}
	if t.cert, t.key, err = node.Write(dir, "node"); err != nil {
		return nil, err
	}
	if !mutual {
		return t, nil
	}
	client, err := ca.Issue("idem-cluster client", devcert.Client)
	if err != nil {
		return nil, err
	}
	if t.clientCert, t.clientKey, err = client.Write(dir, "client"); err != nil {
		return nil, err
	}
	cc, err := client.TLS()
	if err != nil {
		return nil, err
	}
	t.client.Certificates = []tls.Certificate{cc}
	return t, nil
}

// nodeArgs are the idemd flags that serve HTTPS with these files.
func (t *clusterTLS) nodeArgs() []string {
	if t == nil {
		return nil
	}
	args := []string{"-tls-cert", t.cert, "-tls-key", t.key, "-peer-ca", t.ca}
	if t.mutual {
		args = append(args, "-tls-client-ca", t.ca)
	}
	return args
}

// scheme is the nodes' URL scheme.
func (t *clusterTLS) scheme() string {
	if t == nil {
		return "http"
	}
	return "https"
}

// httpClient is the client this tool asks the nodes with.
func (t *clusterTLS) httpClient() *http.Client {
	if t == nil {
		return http.DefaultClient
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = t.client
	return &http.Client{Transport: tr}
}

// curl is how a client asks a node at base, printed once the cluster runs.
func (t *clusterTLS) curl(out io.Writer, base string) {
	if t == nil {
		fmt.Fprintf(out, "try: curl %s/healthz\n", base)
		return
	}
	flags := "--cacert " + t.ca
	if t.mutual {
		flags += " --cert " + t.clientCert + " --key " + t.clientKey
	}
	fmt.Fprintf(out, "try: curl %s %s/healthz\n", flags, base)
}
