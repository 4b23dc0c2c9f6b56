package etcdtest_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/internal/apitest"
)

// shared is the cluster most tests of this package use, each under a
// Prefix of its own; a test that stops members starts its own cluster.
// Auto-compaction runs on it every second, so every test also runs
// against a keyspace whose history is being compacted away.
var shared *etcdtest.Cluster

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "etcdtest-shared-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared, err = etcdtest.Launch(dir, etcdtest.Options{AutoCompactionMode: "periodic", AutoCompactionRetention: "1s"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdtest: shared cluster:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	shared.Close()
	os.RemoveAll(dir)
	apitest.RemoveBuilds() // the idemd binaries idemd_test.go built
	os.Exit(code)
}

func sharedCluster(testing.TB) *etcdtest.Cluster { return shared }
