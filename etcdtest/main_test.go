package etcdtest_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/internal/apitest"
)

// shared is the cluster most tests of this package use, each under a
// Prefix of its own; a test that stops members starts its own cluster.
// Auto-compaction runs on it every second, so every test also runs
// against a keyspace whose history is being compacted away.
var shared *etcdtest.Cluster

// memberBinary is cmd/etcd-member built without -race when this test
// binary runs under the race detector, so that every cluster's members
// run as processes of their own and the detector instruments Idem's code
// and etcd's client, not three etcd servers (most of the cost, none of
// it Idem's). Without -race it is empty and the members are embedded:
// between the two, both ways of running a member are tested.
var memberBinary string

var membersFlag = flag.String("etcdtest.members", "", "process: members run as processes of their own (cmd/etcd-member, built without -race); embedded: in this binary; empty: processes under -race, embedded otherwise")

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "etcdtest-shared-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	flag.Parse()
	if *membersFlag == "process" || *membersFlag == "" && raceEnabled {
		if memberBinary, err = buildMember(dir); err != nil {
			fmt.Fprintln(os.Stderr, "etcdtest:", err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
		etcdtest.MemberBinaryForTests = memberBinary
	}
	shared, err = etcdtest.Launch(filepath.Join(dir, "shared"), etcdtest.Options{AutoCompactionMode: "periodic",
		AutoCompactionRetention: "1s", MemberBinary: memberBinary})
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

func buildMember(dir string) (string, error) {
	bin := filepath.Join(dir, "etcd-member")
	// Without a symbol table or DWARF: a third less of the link, which
	// every run of this package under -race waits for.
	cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin, "github.com/idemdb/idem/etcdtest/cmd/etcd-member")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build etcd-member: %w\n%s", err, out)
	}
	return bin, nil
}

func sharedCluster(testing.TB) *etcdtest.Cluster { return shared }

// startCluster is etcdtest.Start with this binary's way of running members.
func startCluster(tb testing.TB, o etcdtest.Options) *etcdtest.Cluster {
	tb.Helper()
	o.MemberBinary = memberBinary
	return etcdtest.Start(tb, o)
}
