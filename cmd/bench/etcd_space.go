package main

import (
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idemdb/idem/receipt"
	etcdstore "github.com/idemdb/idem/store/etcd"
)

// etcdSpaceResult is what one counted run of keyed requests cost: etcd
// calls per request, and bbolt bytes per receipt (after compaction and
// defragmentation) against the bytes the same batches take key-less.
type etcdSpaceResult struct {
	txns, ranges float64
	perReceipt   int64 // 0: not measured
	docs         int64 // the batch's documents alone, key-less (0: not measured)
	oneDoc       *etcdSpaceResult
}

// targetEtcdBeyondDocsBytes is issue 39's aim for a retained terminal
// receipt's bbolt bytes beyond its documents.
const targetEtcdBeyondDocsBytes = 1000

// etcdSpace runs n keyed requests of wl one by one from base, then n
// key-less batches of it: round trips, and bytes per receipt and per batch.
func etcdSpace(env *Env, cli *clientv3.Client, s *etcdstore.Store, svc *receipt.Service, wl *workload, base uint64, n int) (etcdSpaceResult, error) {
	env.Progress("etcd: %d counted keyed requests of %d documents", n, wl.docs)
	defer env.ProgressDone()
	var out etcdSpaceResult
	etcdSettle(env, svc) // what earlier cases left to release is not this run's
	before, sizeBefore := s.Stats(), dbSize(env.Ctx, cli)
	for i := range uint64(n) {
		ans, err := svc.Execute(env.Ctx, receipt.Request{Principal: benchPrincipal, Table: benchTable, Key: wl.key(0, base+i), Batch: wl.batch(0, base+i)})
		if err == nil {
			err = checkCommitted(ans, false)
		}
		if err != nil {
			return out, err
		}
	}
	after := s.Stats()
	etcdSettle(env, svc)
	sizeAfter := dbSize(env.Ctx, cli)
	out.txns = float64(after.Txns-before.Txns) / float64(n)
	out.ranges = float64(after.Ranges-before.Ranges) / float64(n)
	if sizeBefore > 0 && sizeAfter > sizeBefore {
		out.perReceipt = (sizeAfter - sizeBefore) / int64(n)
	}
	fast := base + 1<<39 // documents of their own
	for i := range uint64(n) {
		if _, err := svc.ExecuteFast(env.Ctx, benchPrincipal, benchTable, wl.batch(0, fast+i)); err != nil {
			return out, err
		}
	}
	etcdSettle(env, svc)
	if sizeDocs := dbSize(env.Ctx, cli); sizeAfter > 0 && sizeDocs > sizeAfter {
		out.docs = (sizeDocs - sizeAfter) / int64(n)
	}
	return out, nil
}

// setOneDoc keeps the space of a 1-document run beside this one.
func (sp *etcdSpaceResult) setOneDoc(one etcdSpaceResult) { sp.oneDoc = &one }

// set reports sp on a keyed result.
func (sp etcdSpaceResult) set(r *Result) {
	r.Set("round_trips_per_request", round2(sp.txns+sp.ranges))
	r.Set("txns_per_request", round2(sp.txns))
	r.Set("ranges_per_request", round2(sp.ranges))
	sp.setBytes(r, "")
	if sp.oneDoc != nil {
		sp.oneDoc.setBytes(r, "_1doc")
	}
}

// setBytes reports the bytes per receipt, the documents' share, and the
// rest, under names ending in suffix.
func (sp etcdSpaceResult) setBytes(r *Result, suffix string) {
	if sp.perReceipt == 0 {
		return
	}
	r.Set("bbolt_bytes_per_receipt"+suffix, sp.perReceipt)
	if sp.docs == 0 {
		return
	}
	beyond := sp.perReceipt - sp.docs
	r.Set("bbolt_doc_bytes_per_batch"+suffix, sp.docs)
	if beyond < 0 {
		// Two differences of sizes over a few hundred writes: bbolt's
		// page reuse can make the second larger than the first. No
		// figure rather than a wrong one.
		return
	}
	r.Set("bbolt_bytes_beyond_docs"+suffix, beyond)
	if r.Concurrency == 1 {
		r.Targets = append(r.Targets, Target{
			Want:  fmt.Sprintf("etcd bbolt bytes per receipt beyond its documents%s <= %d", suffix, targetEtcdBeyondDocsBytes),
			Got:   fmt.Sprintf("%d (%d per receipt, %d its documents)", beyond, sp.perReceipt, sp.docs),
			Met:   beyond <= targetEtcdBeyondDocsBytes,
			Score: atMost(float64(beyond), targetEtcdBeyondDocsBytes),
		})
	}
}

// etcdSettlePassesMax bounds the maintenance and cleaner passes of one
// etcdSettle.
const etcdSettlePassesMax = 100

// etcdSettle runs maintenance until it releases no more retained
// decisions, then a cleaner pass (which folds settled retention entries
// into chunks): the state a terminal receipt is retained in once the
// background loops caught up, which is what a full quota holds.
func etcdSettle(env *Env, svc *receipt.Service) {
	for range etcdSettlePassesMax {
		st, err := svc.MaintainOnce(env.Ctx)
		if err != nil || st.Released == 0 {
			break
		}
	}
	for range etcdSettlePassesMax {
		if n, err := svc.CleanOnce(env.Ctx); err != nil || n == 0 {
			break
		}
	}
}
