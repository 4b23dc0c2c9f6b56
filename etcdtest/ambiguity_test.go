package etcdtest_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/store"
	etcdstore "github.com/idemdb/idem/store/etcd"
)

// An ambiguous Txn is settled only by its own write: the read-back after
// an ambiguous error takes the batch as committed when the probe key (its
// first put) carries this Apply's nonce, and never because the key holds
// some value. These cases inject the ambiguity between the client and
// etcd (txnFault) and leave another writer's value at the probe key.

// txnFault is a gRPC interceptor that, while armed, answers the next KV
// Txn as a lost connection does (codes.Unavailable: ambiguous), having
// sent it to etcd or not, and runs meanwhile() in between.
type txnFault struct {
	armed atomic.Pointer[txnFaultCase]
}

type txnFaultCase struct {
	send      bool // the Txn reaches etcd (and commits) before the error
	meanwhile func() error
}

func (f *txnFault) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c := f.armed.Load()
	if method != "/etcdserverpb.KV/Txn" || c == nil || !f.armed.CompareAndSwap(c, nil) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	if c.send {
		if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
			return err
		}
	}
	if err := c.meanwhile(); err != nil {
		return fmt.Errorf("the other writer: %w", err)
	}
	return status.Error(codes.Unavailable, "injected: the connection was lost with the Txn in flight")
}

// ambiguityCase is one ambiguous Apply: whether its Txn reaches etcd,
// what was at the probe key before, whether another writer puts there
// meanwhile, and whether Apply may then say the batch committed.
type ambiguityCase struct {
	name                  string
	send, before, another bool
	committed             bool // the only case in which Apply may succeed
}

var ambiguityCases = []ambiguityCase{
	{name: "not sent; another writer's value put meanwhile", another: true},
	{name: "not sent; the key held an earlier value", before: true},
	{name: "committed, then overwritten by another writer", send: true, another: true},
	{name: "not sent; an earlier value, then another writer's", before: true, another: true},
	{name: "committed, nothing after (the read-back settles it)", send: true, committed: true},
}

// ambiguityViolations runs every case on a fresh prefix of c and returns
// each answer that breaks the rule: an Apply whose own write is not at
// the probe key is ErrAmbiguous, never a success; one whose write is
// there is settled as committed, at that write's version.
func ambiguityViolations(t *testing.T, c *etcdtest.Cluster) []string {
	t.Helper()
	prefix := etcdtest.Prefix(t)
	f := &txnFault{}
	faulty := newStoreWith(t, c.ClientWith(t, grpc.WithUnaryInterceptor(f.intercept)), etcdstore.Options{Prefix: prefix})
	other := newStore(t, c, prefix)
	var out []string
	for i, ac := range ambiguityCases {
		probe := []byte(fmt.Sprintf("probe/%d", i))
		if ac.before {
			if _, err := faulty.Apply(ctx, new(store.Batch).Put(probe, []byte("earlier"))); err != nil {
				t.Fatal(err)
			}
		}
		var othersVersion store.Version
		f.armed.Store(&txnFaultCase{send: ac.send, meanwhile: func() (err error) {
			if ac.another {
				othersVersion, err = other.Apply(ctx, new(store.Batch).Put(probe, []byte("the other writer's")))
			}
			return err
		}})
		v, err := faulty.Apply(ctx, new(store.Batch).Put(probe, []byte("mine")).Put([]byte(fmt.Sprintf("other/%d", i)), nil))
		if f.armed.Load() != nil {
			t.Fatalf("%s: the Txn never went through the interceptor", ac.name)
		}
		it, gerr := other.Get(ctx, probe)
		switch {
		case gerr != nil && ac.send:
			t.Fatalf("%s: reading the probe: %v", ac.name, gerr)
		case ac.committed && (err != nil || v != it.Version):
			out = append(out, fmt.Sprintf("%s: Apply answered %d, %v; want its write's version %d", ac.name, v, err, it.Version))
		case !ac.committed && !errors.Is(err, store.ErrAmbiguous):
			out = append(out, fmt.Sprintf("%s: Apply answered %d, %v with %q at the probe key (the other writer's at %d); want ErrAmbiguous",
				ac.name, v, err, it.Value, othersVersion))
		}
	}
	return out
}

// TestAmbiguity_TheReadBackTakesOnlyItsOwnWrite: see ambiguityViolations.
func TestAmbiguity_TheReadBackTakesOnlyItsOwnWrite(t *testing.T) {
	for _, v := range ambiguityViolations(t, sharedCluster(t)) {
		t.Error(v)
	}
}
