package etcdtest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/receipt"
)

// Sessions in the etcd chaos: one key in three is not sent as a keyed
// batch but staged in an interactive session on the node that began it and
// committed under the key — the same batch, the same counter, so the same
// model holds: the commit applies at most once, a committed answer means
// it did, and a not-applied one (a conflict, or session_aborted: expired,
// or presumed aborted after its node died) that it never does. Each key
// has one session, kept across the retries of its commit: a client that
// began another under the same key would be asking for another request
// (a 422), not retrying this one.

// chaosSessionTTL lets some sessions outlive their TTL within a seed.
const chaosSessionTTL = 3 * time.Second

func sessionKey(key int) bool { return (key/chaosDocs)%3 == 0 }

// keySession is the one session of a key.
type keySession struct {
	mu     sync.Mutex
	id     string
	node   int
	staged bool // known to hold the key's batch
}

func (ch *chaos) keySession(key int) *keySession {
	ch.sessMu.Lock()
	defer ch.sessMu.Unlock()
	if ch.sessions == nil {
		ch.sessions = map[int]*keySession{}
	}
	ks := ch.sessions[key]
	if ks == nil {
		ks = &keySession{node: -1}
		ch.sessions[key] = ks
	}
	return ks
}

// up returns node i's service if it is up.
func (ch *chaos) up(i int) *receipt.Service {
	n := ch.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.up {
		return nil
	}
	return n.svc
}

// sessionOp moves key's session one step on — begin, stage, commit — and
// records the commit's answer, or an unknown outcome when it got no
// terminal one.
func (ch *chaos) sessionOp(client, key int, pick uint64) chaosOut {
	ks := ch.keySession(key)
	ks.mu.Lock()
	defer ks.mu.Unlock()
	in := chaosIn{key: key, doc: key % chaosDocs}
	call := ch.now()
	out := chaosOut{class: unknown}
	defer func() { ch.record(client, in, call, out) }()
	rng := rand.New(rand.NewPCG(pick, 3))
	actx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if ks.id == "" {
		svc, n := ch.node(rng)
		if svc == nil {
			return out
		}
		s, err := svc.BeginSession(actx, "alice", chaosSessionTTL)
		if err != nil {
			return out // a begin whose answer is lost leaves a session nobody uses: its TTL ends it
		}
		ks.id, ks.node = s.ID, ch.index(n)
	}
	holder := ch.up(ks.node)
	if !ks.staged {
		if holder == nil {
			return out
		}
		if info, err := holder.SessionInfo(actx, "alice", ks.id); err != nil {
			return out
		} else if info.Stages > 0 {
			ks.staged = true
		} else if info.State == receipt.SessionOpen {
			_, _, err := holder.StageSession(actx, "alice", ks.id, []receipt.TableBatch{{Table: "t", Batch: chaosBatch(key)}})
			if err != nil {
				return out // landed or not, the next step asks the session
			}
			ks.staged = true
		}
	}
	svc := holder
	if svc == nil {
		if svc, _ = ch.node(rng); svc == nil {
			return out
		}
	}
	a, err := svc.CommitSession(actx, receipt.CommitRequest{Principal: "alice", Session: ks.id, Key: fmt.Sprint(key), Wait: 2 * time.Second})
	if err != nil || !a.Terminal && a.Code != code.SessionAborted {
		return out
	}
	out.env = fmt.Sprintf("%d %s %s %s %s", a.Status, a.Outcome, a.Code, a.TxnID, a.Result)
	switch {
	case a.Outcome == receipt.OutcomeCommitted:
		out.class = committed
		ch.sessionsCommitted.Add(1)
	case a.Code == code.SessionAborted, a.Outcome == receipt.OutcomeAborted, a.Outcome == receipt.OutcomeNotApplied:
		out.class = notApplied
		ch.sessionsAborted.Add(1)
	}
	return out
}

// index is the position of n among the nodes.
func (ch *chaos) index(n *chaosNode) int {
	for i, m := range ch.nodes {
		if m == n {
			return i
		}
	}
	return -1
}
