package etcdtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// leadPoll is how often a member process looks at its raft state to
// report a change: a Leader call sees a new leader this much later than
// an embedded member's would.
const leadPoll = 10 * time.Millisecond

// RunMember runs one member of a Cluster as a process of its own: what
// the program at Options.MemberBinary does (cmd/etcd-member). args holds
// one argument, the member's configuration as the Cluster wrote it. It
// reports on stdout "serving" once it listens, "ready" once it has
// a quorum behind it, then "lead <0|1> <term>" at each change, and logs
// etcd's errors on stderr. It returns when stdin closes, without stopping
// the member: the caller exits at once, as after a crash.
func RunMember(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) != 1 {
		return errors.New("etcdtest: a member takes one argument, its configuration")
	}
	var s memberSpec
	if err := json.Unmarshal([]byte(args[0]), &s); err != nil {
		return fmt.Errorf("etcdtest: member configuration: %w", err)
	}
	l := &testLog{logf: func(a ...any) { fmt.Fprintln(stderr, a...) }}
	e, err := embed.StartEtcd(s.config(l.logger()))
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "serving")
	gone := make(chan struct{})
	go func() {
		io.Copy(io.Discard, stdin)
		close(gone)
	}()
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintln(stdout, "ready")
	case err := <-e.Err():
		return err
	case <-gone:
		return nil
	}
	return reportLead(e, stdout, gone)
}

func reportLead(e *embed.Etcd, stdout io.Writer, gone <-chan struct{}) error {
	tick := time.NewTicker(leadPoll)
	defer tick.Stop()
	last := ""
	for {
		leads := 0
		if e.Server.Lead() == uint64(e.Server.MemberID()) {
			leads = 1
		}
		if now := fmt.Sprintf("lead %d %d", leads, e.Server.Term()); now != last {
			fmt.Fprintln(stdout, now)
			last = now
		}
		select {
		case err := <-e.Err():
			return err
		case <-e.Server.StopNotify():
			return errors.New("etcdtest: the member stopped")
		case <-gone:
			return nil
		case <-tick.C:
		}
	}
}
