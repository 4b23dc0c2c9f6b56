// Command idem-cluster starts a cluster to try on one machine: an
// embedded 3-member etcd (this repository's etcdtest, the real server on
// loopback) and idemd nodes on it, each an ordinary process on its own
// port sharing a cluster secret made for the run (<dir>/cluster-secret, so
// that they forward to one another), until Ctrl-C. It is what `make cluster` runs; see docs/cluster.md.
//
//	go run ./etcdtest/cmd/idem-cluster -idemd bin/idemd-dev
//	go run ./etcdtest/cmd/idem-cluster -idemd bin/idemd-dev -mtls   # HTTPS, client certificates
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idemdb/idem/etcdtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, nil); err != nil {
		fmt.Fprintln(os.Stderr, "idem-cluster:", err)
		os.Exit(1)
	}
}

// nodesMax bounds -nodes: a demo, not a deployment.
const nodesMax = 9

// run starts the cluster, calls ready (if set) once every node is
// healthy, and stops everything when ctx ends.
func run(ctx context.Context, args []string, out io.Writer, ready func()) error {
	fs := flag.NewFlagSet("idem-cluster", flag.ContinueOnError)
	var (
		idemd      = fs.String("idemd", "bin/idemd-dev", "the idemd binary to run (make cluster builds it with failpoints, so -failpoints works)")
		dir        = fs.String("dir", "cluster", "directory for etcd's data, the nodes' logs and pid files (emptied at start)")
		nodes      = fs.Int("nodes", 3, fmt.Sprintf("idemd nodes, 1..%d", nodesMax))
		basePort   = fs.Int("base-port", 8421, "node i listens on 127.0.0.1:base-port+i")
		leaseTTL   = fs.Duration("lease-ttl", 5*time.Second, "the nodes' -lease-ttl: how long after a node dies the others adopt its work")
		failpoints = fs.String("failpoints", "", "NODE=TERMS: GO_FAILPOINTS for one node (its first start only), e.g. node-1='receipt/decide-before=1*sleep(30000)'")
		// Longer than the lease by default, so that a killed node's work is
		// seen finished by the others before it comes back.
		restartAfter = fs.Duration("restart-after", 10*time.Second, "restart a node that exited (killed, say) after this long, as a supervisor would; 0: never")
		tlsOn        = fs.Bool("tls", false, "HTTPS: generate a CA and a node certificate (127.0.0.1, localhost) in -dir/tls; the nodes serve and forward over TLS and advertise https URLs")
		mtls         = fs.Bool("mtls", false, "mutual TLS (implies -tls): the nodes require a client certificate the CA signed; one for curl is written to -dir/tls/client.crt and client.key")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nodes < 1 || *nodes > nodesMax || *basePort < 1 || *basePort+*nodes > 65535 {
		return fmt.Errorf("need -nodes in 1..%d and ports base-port..base-port+nodes within 1..65535", nodesMax)
	}
	fpNode, fpTerms, _ := strings.Cut(*failpoints, "=")
	if _, err := os.Stat(*idemd); err != nil {
		return fmt.Errorf("-idemd %s: %w (make cluster builds it)", *idemd, err)
	}
	ct, err := prepareDir(*dir, *tlsOn || *mtls, *mtls)
	if err != nil {
		return err
	}

	secret, err := writeClusterSecret(*dir)
	if err != nil {
		return err
	}
	cluster, err := etcdtest.Launch(filepath.Join(*dir, "etcd"), etcdtest.Options{Fsync: true})
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer cluster.Close()
	endpoints := strings.Join(cluster.Endpoints(), ",")
	fmt.Fprintf(out, "etcd: 3 members at %s (data in %s)\n", endpoints, filepath.Join(*dir, "etcd"))

	// Cancelled on any return, so that the supervisors stop their nodes
	// before wg.Wait (defers run last-in first-out).
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // every supervisor has stopped its node
	defer cancel()
	spec := nodeSpec{bin: *idemd, dir: *dir, out: out, endpoints: endpoints, secret: secret, ct: ct,
		basePort: *basePort, leaseTTL: *leaseTTL, fpNode: fpNode, fpTerms: fpTerms}
	for i := 1; i <= *nodes; i++ {
		n := spec.node(i)
		if err := n.start(); err != nil {
			return err
		}
		wg.Go(func() { n.supervise(ctx, *restartAfter) })
	}
	if err := awaitNodes(ctx, ct, *dir, *basePort, *nodes); err != nil {
		return err
	}
	ct.curl(out, ct.scheme()+"://127.0.0.1:"+strconv.Itoa(*basePort))
	fmt.Fprintln(out, "ready; Ctrl-C stops everything")
	if ready != nil {
		ready()
	}
	<-ctx.Done()
	fmt.Fprintln(out, "stopping")
	return nil
}

// nodeSpec is what the nodes' command lines share.
type nodeSpec struct {
	bin, dir          string
	out               io.Writer
	endpoints, secret string
	ct                *clusterTLS
	basePort          int
	leaseTTL          time.Duration
	fpNode, fpTerms   string // -failpoints: the node armed and its terms
}

// node is the i-th node (from 1): its name, address and command line.
func (s nodeSpec) node(i int) *node {
	name := "node-" + strconv.Itoa(i)
	addr := "127.0.0.1:" + strconv.Itoa(s.basePort+i-1)
	n := &node{name: name, base: s.ct.scheme() + "://" + addr, dir: s.dir, out: s.out,
		args: append([]string{"-store", "etcd", "-etcd-endpoints", s.endpoints, "-etcd-prefix", "/idem/dev/",
			"-node", name, "-addr", addr, "-advertise", s.ct.scheme() + "://" + addr, "-lease-ttl", s.leaseTTL.String(),
			"-cluster-secret-file", s.secret}, s.ct.nodeArgs()...),
		bin: s.bin, env: os.Environ()}
	if name == s.fpNode {
		n.env = append(n.env, "GO_FAILPOINTS="+s.fpTerms)
	}
	return n
}

// clusterSecretBytes is the random part of the nodes' cluster secret,
// written hex-encoded: twice idemd's minimum.
const clusterSecretBytes = 32

// writeClusterSecret writes a new random cluster secret in dir, readable
// by its owner only, and returns its path: every node gets it, so that
// they forward to one another.
func writeClusterSecret(dir string) (string, error) {
	b := make([]byte, clusterSecretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	p := filepath.Join(dir, "cluster-secret")
	if err := os.WriteFile(p, []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
		return "", err
	}
	return p, nil
}

// prepareDir empties dir and, with tlsOn, generates the certificates in
// dir/tls (nil: plain HTTP).
func prepareDir(dir string, tlsOn, mutual bool) (*clusterTLS, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if !tlsOn {
		return nil, nil
	}
	ct, err := writeClusterTLS(filepath.Join(dir, "tls"), mutual)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	return ct, nil
}

// awaitNodes waits until every node answers /healthz.
func awaitNodes(ctx context.Context, ct *clusterTLS, dir string, basePort, nodes int) error {
	client := ct.httpClient()
	for i := 1; i <= nodes; i++ {
		if err := awaitHealthy(ctx, client, ct.scheme()+"://127.0.0.1:"+strconv.Itoa(basePort+i-1)); err != nil {
			return fmt.Errorf("node-%d: %w (see %s)", i, err, filepath.Join(dir, fmt.Sprintf("node-%d.log", i)))
		}
	}
	return nil
}

// node is one supervised idemd process.
type node struct {
	name, base, dir, bin string
	args, env            []string
	out                  io.Writer
	cmd                  *exec.Cmd
}

// start launches the process, its output appended to <dir>/<name>.log and
// its pid in <dir>/<name>.pid.
func (n *node) start() error {
	logf, err := os.OpenFile(filepath.Join(n.dir, n.name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(n.bin, n.args...)
	cmd.Stdout, cmd.Stderr, cmd.Env = logf, logf, n.env
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("%s: %w", n.name, err)
	}
	logf.Close() // the child holds its own descriptor
	n.cmd = cmd
	if err := os.WriteFile(filepath.Join(n.dir, n.name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(n.out, "%s: %s (pid %d, log %s)\n", n.name, n.base, cmd.Process.Pid, logf.Name())
	return nil
}

// supervise waits for the process; one that exits while the cluster runs
// is started again after restartAfter (never with 0), with the failpoints
// of its first start dropped. When ctx ends it stops the process.
func (n *node) supervise(ctx context.Context, restartAfter time.Duration) {
	for {
		exited := make(chan error, 1)
		cmd := n.cmd
		go func() { exited <- cmd.Wait() }()
		select {
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			<-exited
			return
		case err := <-exited:
			fmt.Fprintf(n.out, "%s: exited (%v)\n", n.name, err)
		}
		if restartAfter <= 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(restartAfter): // the supervisor's delay, not a wait for a result
		}
		n.env = withoutFailpoints(n.env)
		if err := n.start(); err != nil {
			fmt.Fprintf(n.out, "%s: restart failed: %v\n", n.name, err)
			return
		}
	}
}

func withoutFailpoints(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "GO_FAILPOINTS=") {
			out = append(out, kv)
		}
	}
	return out
}

// startTimeout bounds how long a node may take to answer /healthz.
const startTimeout = 30 * time.Second

// awaitHealthy polls base's /healthz through client until it answers 200.
func awaitHealthy(ctx context.Context, client *http.Client, base string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/healthz", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no healthy /healthz within %v", startTimeout)
		case <-time.After(50 * time.Millisecond): // poll step, bounded by the deadline
		}
	}
}
