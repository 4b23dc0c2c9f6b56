package receipt

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/lease"
)

// Per-principal quotas (docs/design.md §8: a principal is a tenant). The node-wide
// limits — Options.SessionsOpenMax, Options.ExecutorMax — protect the
// node; these protect the tenants from one another: no principal may hold
// more than Options.SessionsPerPrincipalMax of the sessions open here, nor
// have more than Options.InflightPerPrincipalMax requests inside the
// service at once. A request is in flight from its entry into Execute,
// CommitSession or a session step until it returns — executing, waiting
// for an executor slot, or waiting with Prefer: wait — so a principal's
// executor slots are bounded by the same quota. A principal at its quota
// is refused at once (429), before any work, and nobody else is.
//
// The counts are kept here by principal, never exported by principal (the
// metrics count refusals by kind alone). A session's place is counted
// while its hold is in the active set, whatever removes it — commit,
// abort, expiry, a lost lease — so no ending path needs to remember the
// quota: entries whose hold left are dropped as they are next looked at.

// quotas are the per-principal counts.
type quotas struct {
	mu       sync.Mutex
	inflight map[string]int
	sessions map[string]*principalSessions
	tracked  int // session entries over all principals, live or not yet swept
}

// principalSessions are the sessions one principal has open here, and
// its begins under way (counted before their session exists, so that
// concurrent begins cannot pass the quota together).
type principalSessions struct {
	open     map[string]openSession // by session ID
	starting int
}

// openSession is an open session as its quota sees it: its hold (the
// session is open here while the active set holds it) and its expiry.
type openSession struct {
	held    *lease.Held
	expires time.Time
}

func newQuotas() quotas {
	return quotas{inflight: map[string]int{}, sessions: map[string]*principalSessions{}}
}

// Refusal is a kind of 429 refusal, by the limit that was hit.
type Refusal int

const (
	// RefusedPrincipalSessions: the principal has its quota of sessions open.
	RefusedPrincipalSessions Refusal = iota
	// RefusedNodeSessions: the node has SessionsOpenMax sessions open.
	RefusedNodeSessions
	// RefusedPrincipalInflight: the principal has its quota of requests in flight.
	RefusedPrincipalInflight
	// RefusedExecutor: no executor slot came free in time.
	RefusedExecutor
	refusalKinds
)

// Refusals lists every kind, in order.
var Refusals = []Refusal{RefusedPrincipalSessions, RefusedNodeSessions, RefusedPrincipalInflight, RefusedExecutor}

func (r Refusal) String() string {
	switch r {
	case RefusedPrincipalSessions:
		return "principal_sessions"
	case RefusedNodeSessions:
		return "node_sessions"
	case RefusedPrincipalInflight:
		return "principal_inflight"
	case RefusedExecutor:
		return "executor"
	}
	return "unknown"
}

// countRefusal counts a refusal of kind r.
func (x *executor) countRefusal(r Refusal) { x.core.stats.refused[r].Add(1) }

// enter counts a request of principal in flight, or refuses it when the
// principal has its quota in flight. A nil answer must be followed by
// leave.
func (x *executor) enter(principal string) *code.Error {
	x.quotas.mu.Lock()
	n := x.quotas.inflight[principal]
	if n >= x.core.opts.InflightPerPrincipalMax {
		x.quotas.mu.Unlock()
		x.countRefusal(RefusedPrincipalInflight)
		return &code.Error{Code: code.Overloaded, RetryAfter: x.drainTime(), Message: fmt.Sprintf(
			"this principal has %d requests in progress on this node, its quota (not the node's limit); retry when some have finished", n)}
	}
	x.quotas.inflight[principal] = n + 1
	x.quotas.mu.Unlock()
	return nil
}

// leave ends a request that enter let in.
func (x *executor) leave(principal string) {
	x.quotas.mu.Lock()
	defer x.quotas.mu.Unlock()
	if n := x.quotas.inflight[principal] - 1; n > 0 {
		x.quotas.inflight[principal] = n
	} else {
		delete(x.quotas.inflight, principal)
	}
}

// errExecutorFull refuses a session step that found no executor slot.
func (x *executor) errExecutorFull() *code.Error {
	x.countRefusal(RefusedExecutor)
	return &code.Error{Code: code.Overloaded, RetryAfter: x.drainTime(),
		Message: "the executor is full (the node's limit); retry later"}
}

// refuseExecutor answers a keyed request whose receipt is left pending
// for want of an executor slot.
func (x *executor) refuseExecutor(txnID string) Answer {
	x.countRefusal(RefusedExecutor)
	return answerOverloaded(txnID, x.drainTime())
}

// retryAfterExpiry is a Retry-After for a place that frees up at until:
// whole seconds from now, rounded up, at least one.
func retryAfterExpiry(now, until time.Time) time.Duration {
	s := math.Ceil(until.Sub(now).Seconds())
	return time.Duration(max(s, 1)) * time.Second
}
