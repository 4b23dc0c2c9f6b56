package etcdtest

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/idemdb/idem/internal/devcert"
)

// TLSFiles are the PEM files of a cluster started with Options.TLS: a CA
// of its own, the members' server certificate (127.0.0.1 and localhost)
// and a client certificate the members require (client cert auth).
type TLSFiles struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

// writeTLS generates the CA and both certificates into dir (valid for
// devcert's lifetime, a day: a test or a demo, not a deployment).
func writeTLS(dir string) (TLSFiles, error) {
	f := TLSFiles{CA: filepath.Join(dir, "ca.crt")}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, err
	}
	ca, err := devcert.NewCA("etcdtest CA")
	if err != nil {
		return f, err
	}
	if err := ca.WriteCA(f.CA); err != nil {
		return f, err
	}
	server, err := ca.Issue("etcdtest server", devcert.Server)
	if err == nil {
		f.ServerCert, f.ServerKey, err = server.Write(dir, "server")
	}
	if err != nil {
		return f, fmt.Errorf("etcdtest: server certificate: %w", err)
	}
	client, err := ca.Issue("etcdtest client", devcert.Client)
	if err == nil {
		f.ClientCert, f.ClientKey, err = client.Write(dir, "client")
	}
	if err != nil {
		return f, fmt.Errorf("etcdtest: client certificate: %w", err)
	}
	return f, nil
}
