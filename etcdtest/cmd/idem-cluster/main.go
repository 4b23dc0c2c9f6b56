// Command idem-cluster starts a cluster to try on one machine: an
// embedded 3-member etcd (this repository's etcdtest, the real server on
// loopback) and idemd nodes on it, each an ordinary process on its own
// port, until Ctrl-C. It is what `make cluster` runs; see docs/cluster.md.
//
//	go run ./etcdtest/cmd/idem-cluster -idemd bin/idemd-dev
package main

import (
	"context"
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
		failpoints = fs.String("failpoints", "", "NODE=TERMS: GO_FAILPOINTS for one node, e.g. node-1='receipt/decide-before=1*sleep(30000)'")
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
	if err := os.RemoveAll(*dir); err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}

	cluster, err := etcdtest.Launch(filepath.Join(*dir, "etcd"), etcdtest.Options{Fsync: true})
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer cluster.Close()
	endpoints := strings.Join(cluster.Endpoints(), ",")
	fmt.Fprintf(out, "etcd: 3 members at %s (data in %s)\n", endpoints, filepath.Join(*dir, "etcd"))

	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			if p.Process != nil {
				_ = p.Process.Signal(syscall.SIGTERM)
				_ = p.Wait()
			}
		}
	}()
	for i := 1; i <= *nodes; i++ {
		node := "node-" + strconv.Itoa(i)
		addr := "127.0.0.1:" + strconv.Itoa(*basePort+i-1)
		logf, err := os.Create(filepath.Join(*dir, node+".log"))
		if err != nil {
			return err
		}
		cmd := exec.Command(*idemd, "-store", "etcd", "-etcd-endpoints", endpoints, "-etcd-prefix", "/idem/dev/",
			"-node", node, "-addr", addr, "-advertise", "http://"+addr, "-lease-ttl", leaseTTL.String())
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.Env = os.Environ()
		if node == fpNode {
			cmd.Env = append(cmd.Env, "GO_FAILPOINTS="+fpTerms)
		}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("%s: %w", node, err)
		}
		procs = append(procs, cmd)
		if err := os.WriteFile(filepath.Join(*dir, node+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: http://%s (pid %d, log %s)\n", node, addr, cmd.Process.Pid, logf.Name())
	}
	for i := 1; i <= *nodes; i++ {
		if err := awaitHealthy(ctx, "http://127.0.0.1:"+strconv.Itoa(*basePort+i-1)); err != nil {
			return fmt.Errorf("node-%d: %w (see %s)", i, err, filepath.Join(*dir, fmt.Sprintf("node-%d.log", i)))
		}
	}
	fmt.Fprintln(out, "ready; Ctrl-C stops everything")
	if ready != nil {
		ready()
	}
	<-ctx.Done()
	fmt.Fprintln(out, "stopping")
	return nil
}

// startTimeout bounds how long a node may take to answer /healthz.
const startTimeout = 30 * time.Second

// awaitHealthy polls base's /healthz until it answers 200.
func awaitHealthy(ctx context.Context, base string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/healthz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
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
