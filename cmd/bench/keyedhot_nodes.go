package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/receipt"
	etcdstore "github.com/idemdb/idem/store/etcd"
	"github.com/idemdb/idem/table"
)

// keyed-hot on several nodes of one etcd (issue 37 part 3): the etcd and
// cluster suites run receipts:keyed-hot's workload with the clients spread
// over nodes, whose latches do not order one another's batches: they meet
// on etcd, and are re-planned (receipt/replan.go), not refused. Each
// reports aborts_per_op (transaction_conflict answers, counted, not
// failed) and replans_per_op (receipt.Stats.Replans).

// hotTargetConc is the concurrency issue 37 sets the cluster's aim at
// (keyed-hot@8, aborts_per_op 0): run beside the suite's own unless
// -concurrency names the ones to run.
const hotTargetConc = 8

// etcdHotNodes is the receipt services the etcd suite's keyed-hot spreads
// its clients over: two, the fewest that meet on etcd.
const etcdHotNodes = 2

// hotConcurrencies is concs with hotTargetConc, sorted, unless
// -concurrency was given.
func hotConcurrencies(env *Env, concs []int) []int {
	if env.Opts.ConcurrencySet || slices.Contains(concs, hotTargetConc) {
		return concs
	}
	out := append(slices.Clone(concs), hotTargetConc)
	slices.Sort(out)
	return out
}

// hotTally counts a keyed-hot case's aborts and its nodes' re-plans.
type hotTally struct {
	aborts atomic.Uint64
	svcs   []*receipt.Service
	before uint64
}

func newHotTally(svcs []*receipt.Service) *hotTally {
	h := &hotTally{svcs: svcs}
	h.before = h.replans()
	return h
}

func (h *hotTally) replans() uint64 {
	var n uint64
	for _, s := range h.svcs {
		n += s.Stats().Replans
	}
	return n
}

// set adds the tallies per op to r.
func (h *hotTally) set(r *Result, nodes int) {
	r.Set("nodes", nodes)
	if r.Ops > 0 {
		r.Set("aborts_per_op", round(float64(h.aborts.Load())/float64(r.Ops), 4))
		r.Set("replans_per_op", round(float64(h.replans()-h.before)/float64(r.Ops), 3))
	}
}

// etcdKeyedHot is keyed-hot through etcdHotNodes receipt services on one
// etcdstore prefix, at each concurrency.
func etcdKeyedHot(env *Env, cli *clientv3.Client, prefix string, concs []int) ([]*Result, error) {
	var svcs []*receipt.Service
	var stores []*etcdstore.Store
	defer func() { // services first: they write to their stores as they close
		for _, s := range svcs {
			s.Close()
		}
		for _, s := range stores {
			s.Close()
		}
	}()
	for i := range etcdHotNodes {
		s, err := etcdstore.New(cli, etcdstore.Options{Prefix: prefix})
		if err != nil {
			return nil, err
		}
		stores = append(stores, s)
		svc, err := receipt.Open(env.Ctx, s, receipt.Options{Node: fmt.Sprintf("hot-%d", i), Logger: discardLogger, ReplanContended: true})
		if err != nil {
			return nil, err
		}
		svcs = append(svcs, svc)
	}
	if _, _, err := svcs[0].Tables().Create(env.Ctx, benchPrincipal, benchTable, benchShards); err != nil {
		return nil, err
	}
	wl := newWorkload(env.Opts.BatchDocs)
	var out []*Result
	for round, c := range concs {
		r0 := uint64(round+1) << 40 // keys of each case apart from the others'
		tally := newHotTally(svcs)
		m, err := env.Loop(Loop{Case: caseKeyedHot, Concurrency: c}, func(ctx context.Context, w int, i uint64) error {
			b := wl.batch(w, r0+i)
			b.Transforms = []table.Transform{hotInc}
			ans, err := svcs[(w+int(i))%len(svcs)].Execute(ctx, receipt.Request{Principal: benchPrincipal, Table: benchTable, Key: wl.key(w, r0+i), Batch: b})
			if err != nil {
				return err
			}
			if ans.Code == code.TransactionConflict {
				tally.aborts.Add(1)
				return nil
			}
			return checkCommitted(ans, false)
		})
		if err != nil {
			return out, err
		}
		r := m.Result(caseKeyedHot, c)
		tally.set(&r, len(svcs))
		out = append(out, &r)
	}
	return out, nil
}

// clusterKeyedHot is keyed-hot over HTTP with the clients spread
// round-robin over every node of the cluster suite.
func clusterKeyedHot(env *Env, nodes []*clusterNode, c int) (Result, error) {
	wl := newWorkload(env.Opts.BatchDocs)
	svcs := make([]*receipt.Service, len(nodes))
	for i, n := range nodes {
		svcs[i] = n.svc
	}
	tally := newHotTally(svcs)
	bufs := make([][]byte, c)
	m, err := env.Loop(Loop{Case: caseKeyedHot, Concurrency: c}, func(ctx context.Context, w int, i uint64) error {
		bufs[w] = appendHotBody(wl, bufs[w][:0], w, i)
		conflict, err := clusterPostHot(ctx, nodes[(w+int(i))%len(nodes)], bufs[w], wl.key(w, i))
		if conflict {
			tally.aborts.Add(1)
		}
		return err
	})
	if err != nil {
		return Result{}, err
	}
	r := m.Result(caseKeyedHot, c)
	tally.set(&r, len(nodes))
	return r, nil
}

// appendHotBody is the keyed body of call i of worker w with the $inc of
// the shared document.
func appendHotBody(wl *workload, dst []byte, w int, i uint64) []byte {
	dst = wl.appendBody(dst, w, i)
	dst = dst[:len(dst)-1] // the closing brace
	return append(dst, `,"transforms":[{"id":"`+hotDocID+`","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`...)
}

// clusterPostHot sends a keyed-hot batch: a 201 is a commit, a 409
// transaction_conflict an abort counted (conflict=true), anything else an
// error.
func clusterPostHot(ctx context.Context, node *clusterNode, body []byte, key string) (conflict bool, err error) {
	status, _, answer, err := clusterSend(ctx, node, body, key)
	switch {
	case err != nil:
		return false, err
	case status == http.StatusCreated:
		return false, nil
	case status == http.StatusConflict && bytes.Contains(answer, []byte(`"code":"`+string(code.TransactionConflict)+`"`)):
		return true, nil
	}
	return false, fmt.Errorf("POST %s (key %q): %d %s", node.base, key, status, answer)
}
