package main

import (
	"slices"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	etcdstore "github.com/idemdb/idem/store/etcd"
)

// TestBench_EtcdSelectsCases: -case narrows the etcd suite (a profile of
// one case needs nothing else running), and names no case it lacks.
func TestBench_EtcdSelectsCases(t *testing.T) {
	ss, err := selectSuites("etcd")
	if err != nil {
		t.Fatal(err)
	}
	got, err := selectCases("etcd:keyed,txn", ss)
	if err != nil || !got["etcd"]["keyed"] || !got["etcd"]["txn"] || got["etcd"]["replay"] || got["etcd"]["apply"] {
		t.Errorf("selectCases(etcd:keyed,txn) = %v, %v; want keyed and txn only", got, err)
	}
	if got, err := selectCases("etcd:fast", ss); err == nil {
		t.Errorf("selectCases(etcd:fast) = %v, want an error", got)
	}
}

// TestBench_GroupingFigures: Applies per Txn counts a group's Applies in
// its one Txn, and a lone Apply as its own.
func TestBench_GroupingFigures(t *testing.T) {
	var r Result
	// 10 Txns: 2 groups of 5 Applies, 8 alone: 18 Applies, 10 grouped.
	setGrouping(&r, etcdstore.Stats{Txns: 5}, etcdstore.Stats{Txns: 15, Groups: 2, Grouped: 10})
	if got := r.Extra["applies_per_txn"]; got != 1.8 {
		t.Errorf("applies_per_txn = %v, want 1.8", got)
	}
	if got := r.Extra["grouped_share"]; got != 0.56 {
		t.Errorf("grouped_share = %v, want 0.56", got)
	}
	var none Result
	setGrouping(&none, etcdstore.Stats{Txns: 3}, etcdstore.Stats{Txns: 3})
	if len(none.Extra) != 0 {
		t.Errorf("no Txns in the window: figures %v, want none", none.Extra)
	}
}

// TestBench_TxnKeysShape: the N-key floor's Txn has the recorded Txn's
// puts (nested ones counted), of their key and value lengths, its
// compares and Else reads, and is named by its puts.
func TestBench_TxnKeysShape(t *testing.T) {
	put := func(k, v string) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k), Value: []byte(v)}}}
	}
	inner := &pb.TxnRequest{Success: []*pb.RequestOp{put("/p/doc/000000000001", "0123456789")}}
	rec := &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("/p/a")}, {Key: []byte("/p/b")}, {Key: []byte("/p/c")}},
		Success: []*pb.RequestOp{put("/p/rcpt/0123456789abcdef", "record"), {Request: &pb.RequestOp_RequestTxn{RequestTxn: inner}}},
		Failure: []*pb.RequestOp{{}, {}, {}},
	}
	var sh txnShape
	sh.addTxn(rec)
	if sh.name() != "txn-2keys" || sh.compares != 3 || sh.elseReads != 3 {
		t.Fatalf("shape %+v named %s, want 2 puts, 3 compares, 3 Else reads", sh, sh.name())
	}
	got := sh.txn("/bench/x/", 7, 9, sh.values())
	var back txnShape
	back.addTxn(got)
	if !slices.Equal(back.keyLens, sh.keyLens) || !slices.Equal(back.valueLens, sh.valueLens) || back.compares != 3 || back.elseReads != 3 {
		t.Errorf("floor Txn's shape %+v, want %+v", back, sh)
	}
	keys := map[string]bool{}
	for _, c := range got.Compare {
		if keys[string(c.Key)] {
			t.Errorf("key %q compared twice", c.Key)
		}
		keys[string(c.Key)] = true
	}
}

// TestBench_TxnKeysRatio: keyed rows carry their rate over the N-key
// floor's at the same concurrency, and nothing where it did not run.
func TestBench_TxnKeysRatio(t *testing.T) {
	k64, k8 := &Result{Case: "keyed", Concurrency: 64, OpsPerSec: 300}, &Result{Case: "keyed", Concurrency: 8, OpsPerSec: 100}
	etcdTxnKeysRatios([]*Result{k64, k8, {Case: "txn-12keys", Concurrency: 64, OpsPerSec: 400}}, "txn-12keys")
	if got := k64.Extra[fieldOverTxnKeys]; got != 0.75 {
		t.Errorf("keyed@64 over txn-12keys@64 = %v, want 0.75", got)
	}
	if _, ok := k8.Extra[fieldOverTxnKeys]; ok {
		t.Errorf("keyed@8 has a ratio without a floor at 8: %v", k8.Extra)
	}
}
