package etcdstore

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/idemdb/idem/store"
)

// TestTxn_EqualConditionsAreOneCompare: a condition repeated in a batch (a
// keyed batch across a table's shards conditions each shard's part on the
// table's metadata) is one Compare, while conditions that differ on the
// same key — a batch that contradicts itself must still fail — are each
// compared; the Else branch reads each distinct key once.
func TestTxn_EqualConditionsAreOneCompare(t *testing.T) {
	s := &Store{prefix: []byte("/p/")}
	b := new(store.Batch).
		Absent([]byte("r")).
		AtVersion([]byte("meta"), 5).
		AtVersion([]byte("meta"), 5).
		Absent([]byte("r")).
		AtVersion([]byte("meta"), 6).
		Present([]byte("meta")).
		AtVersion([]byte("meta"), 5).
		Put([]byte("r"), []byte("v"))
	req := s.txn(b.Conds, b.Ops, 1)
	type cmp struct {
		key    string
		target pb.Compare_CompareTarget
		rev    int64
	}
	var got []cmp
	for _, c := range req.Compare {
		got = append(got, cmp{string(c.Key), c.Target, c.GetModRevision() + c.GetCreateRevision()})
	}
	want := []cmp{{"/p/r", pb.Compare_CREATE, 0}, {"/p/meta", pb.Compare_MOD, 5}, {"/p/meta", pb.Compare_MOD, 6}, {"/p/meta", pb.Compare_CREATE, 0}}
	if len(got) != len(want) {
		t.Fatalf("compares %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("compare %d = %v, want %v", i, got[i], want[i])
		}
	}
	if n := len(req.Failure); n != 2 {
		t.Errorf("Else reads %d keys, want 2 (r and meta once each)", n)
	}
	// The failure is still judged on every condition, in batch order.
	resp := &pb.TxnResponse{Header: &pb.ResponseHeader{Revision: 9}}
	err := s.failedCondition(b.Conds, resp)
	if ce, ok := err.(*store.ConditionError); !ok || string(ce.Cond.Key) != "meta" || ce.Cond.Version != 5 {
		t.Errorf("failedCondition with meta absent = %v, want meta's first condition (at version 5)", err)
	}
}
