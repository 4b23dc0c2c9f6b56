package etcdtest

import (
	"fmt"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// A server is one start of a member: embedded in this process, or a
// process of its own (Options.MemberBinary, process.go). A Cluster sees
// only this, so that every test runs the same either way.
type server interface {
	// awaitReady waits until the member serves with a quorum behind it.
	awaitReady(timeout time.Duration) error
	// leads reports whether the member is the leader, and its term.
	leads() (bool, uint64)
	// stopped reports whether the member has stopped, halted or by itself.
	stopped() bool
	// halt stops the raft loop at once, with no leadership transfer and
	// no draining of requests: a crash. close then releases the rest
	// (listeners, files) and returns once it is released.
	halt()
	close()
}

// embedded is a member in this process.
type embedded struct{ e *embed.Etcd }

func startEmbedded(s memberSpec, l *testLog) (server, error) {
	e, err := embed.StartEtcd(s.config(l.logger()))
	if err != nil {
		return nil, err
	}
	return embedded{e}, nil
}

func (s embedded) awaitReady(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-s.e.Server.ReadyNotify():
		return nil
	case err := <-s.e.Err():
		return fmt.Errorf("stopped before ready: %v", err)
	case <-t.C:
		return fmt.Errorf("not ready after %v", timeout)
	}
}

func (s embedded) leads() (bool, uint64) {
	return s.e.Server.Lead() == uint64(s.e.Server.MemberID()), s.e.Server.Term()
}

func (s embedded) stopped() bool {
	select {
	case <-s.e.Server.StopNotify():
		return true
	default:
		return false
	}
}

func (s embedded) halt()  { s.e.Server.HardStop() }
func (s embedded) close() { s.e.Close() }

func crash(s server) {
	s.halt()
	s.close()
}
