package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/table"
)

// The batch shape of docs/design.md §12, shared by the twopc, receipts, http and
// peer suites: -batch-docs inserts of docBytes-byte JSON documents, every
// document ID distinct across the whole run, so no two operations conflict.
const (
	docBytes = 190
	// benchTable is the table every case writes.
	benchTable = "bench"
	// benchShards is its shard count (the default: a 10-doc batch touches
	// all four shards, so 2PC has four participants).
	benchShards = 4
	// benchPrincipal owns the keyed requests of the in-process cases; the
	// http suite uses the server's anonymous principal.
	benchPrincipal = "bench"
)

// workload builds the batches of one case. IDs embed a per-workload tag,
// so cases that share a store never touch each other's documents or keys.
type workload struct {
	docs int
	doc  json.RawMessage // one ≈190-byte document, shared read-only
	tag  string
	// perWorker, if > 0, makes each worker reuse its own perWorker document
	// ids round-robin: the store stops growing, and no two workers' batches
	// touch the same document (which would abort one as a conflict).
	perWorker uint64
}

var workloadSeq = rand.New(rand.NewPCG(7, uint64(rand.Uint32())))

func newWorkload(docs int) *workload {
	return &workload{docs: docs, doc: benchDoc(), tag: strconv.FormatUint(workloadSeq.Uint64()%(1<<40), 36)}
}

// benchDoc is a payment-like JSON object of exactly docBytes bytes.
func benchDoc() json.RawMessage {
	const head = `{"amount":4200,"currency":"usd","customer":"cus_4f3a2b1c9d","status":"succeeded","description":"`
	const tail = `"}`
	pad := docBytes - len(head) - len(tail)
	return json.RawMessage(head + strings.Repeat("x", max(pad, 0)) + tail)
}

// docID is the j-th document of call i of worker w.
func (wl *workload) appendDocID(dst []byte, w int, i uint64, j int) []byte {
	dst = append(dst, 'd')
	dst = append(dst, wl.tag...)
	dst = append(dst, '-')
	if wl.perWorker > 0 {
		n := uint64(w)*wl.perWorker + (i*uint64(wl.docs)+uint64(j))%wl.perWorker
		return strconv.AppendUint(dst, n, 10)
	}
	dst = strconv.AppendInt(dst, int64(w), 10)
	dst = append(dst, '-')
	dst = strconv.AppendUint(dst, i, 10)
	dst = append(dst, '-')
	return strconv.AppendInt(dst, int64(j), 10)
}

// batch is call i of worker w as a table.Batch.
func (wl *workload) batch(w int, i uint64) *table.Batch {
	b := &table.Batch{Inserts: make([]table.Insert, wl.docs)}
	var buf []byte
	for j := range b.Inserts {
		buf = wl.appendDocID(buf[:0], w, i, j)
		b.Inserts[j] = table.Insert{ID: string(buf), Doc: wl.doc}
	}
	return b
}

// appendBody is call i of worker w as the JSON body of the batch route.
func (wl *workload) appendBody(dst []byte, w int, i uint64) []byte {
	dst = append(dst, `{"inserts":[`...)
	for j := 0; j < wl.docs; j++ {
		if j > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"id":"`...)
		dst = wl.appendDocID(dst, w, i, j)
		dst = append(dst, `","doc":`...)
		dst = append(dst, wl.doc...)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// key is the Idempotency-Key of call i of worker w.
func (wl *workload) key(w int, i uint64) string {
	return "k-" + wl.tag + "-" + strconv.Itoa(w) + "-" + strconv.FormatUint(i, 10)
}

// replayIndex spreads workers over the set so they do not walk in step.
func replayIndex(w int, i uint64, n int) uint64 {
	return (uint64(w)*7919 + i) % uint64(n)
}

var discardLogger = slog.New(slog.DiscardHandler)

// stack is an engine with the receipt service on it and the bench table.
type stack struct {
	dir     string
	db      *engine.DB
	svc     *receipt.Service
	cleanup func()
}

// openStack opens a fresh store in its own data dir with the receipt
// service (default options: 10s leases, executor of 256) and the table.
// The engine runs as idemd's does: terminal receipts go to the value log
// at checkpoints.
// oneTenantInflightMax is the per-principal in-flight quota of the
// suites' services (one principal): above any -concurrency.
const oneTenantInflightMax = 1 << 20

func openStack(env *Env, name string, opts receipt.Options) (*stack, error) {
	dir, cleanup, err := env.DataDir(name)
	if err != nil {
		return nil, err
	}
	db, err := engine.Open(dir, engine.Options{Logger: discardLogger, ColdValue: receipt.ColdValue})
	if err != nil {
		cleanup()
		return nil, err
	}
	opts.Logger = discardLogger
	if opts.InflightPerPrincipalMax == 0 {
		// One tenant: every worker may be in flight, as before quotas;
		// the quota is not what a suite measures.
		opts.InflightPerPrincipalMax = oneTenantInflightMax
	}
	svc, err := receipt.Open(env.Ctx, db, opts)
	if err != nil {
		db.Close()
		cleanup()
		return nil, err
	}
	if _, _, err := svc.Tables().Create(env.Ctx, benchPrincipal, benchTable, benchShards); err != nil {
		svc.Close()
		db.Close()
		cleanup()
		return nil, err
	}
	return &stack{dir: dir, db: db, svc: svc, cleanup: cleanup}, nil
}

func (s *stack) fsyncs() uint64 { return s.db.Stats().WAL.Fsyncs }

// fsyncNanos is the time the store's WAL has spent in fsync calls.
func (s *stack) fsyncNanos() int64 { return s.db.Stats().WAL.FsyncDuration.Sum }

func (s *stack) close() error {
	s.svc.Close()
	err := s.db.Close()
	s.cleanup()
	return err
}

// checkCommitted turns anything but a fresh committed envelope into an
// error: a benchmark that silently measured 429s would be worthless.
func checkCommitted(a receipt.Answer, replay bool) error {
	if a.Status != 201 || !a.Terminal || a.Replayed != replay {
		return fmt.Errorf("unexpected answer: status %d code %q outcome %q replayed=%v: %s",
			a.Status, a.Code, a.Outcome, a.Replayed, a.Message)
	}
	return nil
}

// precreate executes the first n calls of worker 0 of wl as keyed requests
// from a few goroutines, so a replay case has terminal receipts to replay.
func precreate(ctx context.Context, n int, exec func(ctx context.Context, i uint64) error) error {
	const workers = 16
	errs := make(chan error, workers)
	next := make(chan uint64)
	go func() {
		defer close(next)
		for i := 0; i < n; i++ {
			select {
			case next <- uint64(i):
			case <-ctx.Done():
				return
			}
		}
	}()
	for range workers {
		go func() {
			var first error
			for i := range next {
				if first == nil {
					first = exec(ctx, i)
				}
			}
			errs <- first
		}()
	}
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// Targets and ratios shared by the suites.

// fsyncWaits expresses a p50 in sequential fsync waits: p50 divided by the
// fsync-serial floor's p50 of the same run.
func (e *Env) fsyncWaits(p50us float64) float64 {
	f := e.Floors()
	if f == nil || f.Serial.P50us <= 0 {
		return 0
	}
	return p50us / f.Serial.P50us
}

// byCase indexes results by case and concurrency.
type byCase map[string]map[int]*Result

func indexResults(rs []*Result) byCase {
	out := byCase{}
	for _, r := range rs {
		if out[r.Case] == nil {
			out[r.Case] = map[int]*Result{}
		}
		out[r.Case][r.Concurrency] = r
	}
	return out
}

func (b byCase) get(name string, c int) *Result {
	if m := b[name]; m != nil {
		return m[c]
	}
	return nil
}

// best is the case's result with the highest rate.
func (b byCase) best(name string) *Result {
	var out *Result
	for _, r := range b[name] {
		if out == nil || r.OpsPerSec > out.OpsPerSec {
			out = r
		}
	}
	return out
}

// rateTarget adds "case@c >= want ops/s".
func rateTarget(r *Result, what string, want float64) {
	r.Targets = append(r.Targets, Target{
		Want:  fmt.Sprintf("%s >= %.0f/s", what, want),
		Got:   fmt.Sprintf("%.0f/s (%.2fx)", r.OpsPerSec, r.OpsPerSec/want),
		Met:   r.OpsPerSec >= want,
		Score: atLeast(r.OpsPerSec, want),
	})
}

// reportAll reports held-back results in order.
func (e *Env) reportAll(rs []*Result) {
	for _, r := range rs {
		e.Report(*r)
	}
}

// concurrencies is the suite's list: -concurrency if given, else def.
func (e *Env) concurrencies(def []int) []int {
	if e.Opts.ConcurrencySet || def == nil {
		return e.Opts.Concurrency
	}
	return def
}
