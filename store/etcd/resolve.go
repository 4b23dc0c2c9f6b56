package etcdstore

import (
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/store"
)

// resolveReadsMax bounds the read-backs of one ambiguous Apply: a read
// that fails (the cluster electing a leader, say) is tried again, up to
// this many times within the resolve timeout.
const resolveReadsMax = 3

// settle turns the error of a Txn call into Apply's answer. An explicit
// rejection is returned as such. An ambiguous one is read back: if the
// batch's first put carries this Apply's nonce, the Txn committed and its
// revision is that key's ModRevision. Otherwise the answer stays
// ErrAmbiguous — the Txn may still commit, or may have committed and been
// overwritten since — and nothing is resent (see the package comment).
func (s *Store) settle(ctx context.Context, ops []store.Op, nonce uint64, err error) (store.Version, error) {
	answer := applyError(err)
	if !isAmbiguous(answer) {
		return 0, answer
	}
	s.stats.ambiguous.Add(1)
	probe := firstPut(ops)
	if probe == nil {
		return 0, answer // a batch of deletes leaves no nonce to find
	}
	// The read-back runs even when the caller's context has ended — that
	// is the commonest ambiguity — under its own bound.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.resolve)
	defer cancel()
	for range resolveReadsMax {
		s.stats.ranges.Add(1)
		resp, rerr := s.kv.Range(rctx, &pb.RangeRequest{Key: s.key(probe)})
		if rerr != nil {
			if rctx.Err() != nil {
				break
			}
			continue
		}
		if len(resp.Kvs) == 1 {
			_, found, uerr := unseal(resp.Kvs[0].Key, resp.Kvs[0].Value)
			if fault.Planted(fault.BugEtcdSettleAnyValue) { // planted only under -tags idem_selftest
				found = nonce // planted bug: whoever's write is there is taken as this Apply's
			}
			if uerr == nil && found == nonce {
				s.stats.resolved.Add(1)
				return store.Version(resp.Kvs[0].ModRevision), nil
			}
		}
		return 0, fmt.Errorf("%w (read back: key %q does not carry the batch's write)", answer, probe)
	}
	return 0, fmt.Errorf("%w (read back failed within %v)", answer, s.resolve)
}

func isAmbiguous(err error) bool { return errors.Is(err, store.ErrAmbiguous) }

// firstPut is the key of the batch's first put, or nil if it has none.
func firstPut(ops []store.Op) []byte {
	for _, op := range ops {
		if !op.Delete {
			return op.Key
		}
	}
	return nil
}
