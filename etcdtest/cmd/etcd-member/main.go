// Command etcd-member runs one member of an etcdtest Cluster as a process
// of its own (etcdtest.Options.MemberBinary, etcdtest.RunMember). The
// etcdtest package's tests build it without -race, so that under the race
// detector only Idem's code and etcd's client are instrumented, not the
// three servers.
package main

import (
	"fmt"
	"os"

	"github.com/idemdb/idem/etcdtest"
)

func main() {
	if err := etcdtest.RunMember(os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "etcd-member:", err)
		os.Exit(1)
	}
}
