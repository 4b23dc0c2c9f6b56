package main

import (
	"testing"

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
