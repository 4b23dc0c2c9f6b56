package receipt_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
	"github.com/idemdb/idem/vfs/memfs"
)

// The metamorphic test (issue 36, pebble's metamorphic tests as the model):
// one seeded workload of keyed requests, run on every flow a new receipt
// can take and every option set that changes how it is written, must give
// the same answers, byte for byte, and the same documents. The flows are the
// routes of writeplan.go, chosen by the store's capabilities and the
// options: once (createTerminal) on the engine, chained (BeginCommit) on
// the engine with deferred resolution, begin+decide on memstore (no
// chains) and with SeparateDecide, not_applied for a table that does not
// exist. A divergence between them is a bug in one flow. (The pending
// route answers differently by design; crashprefix_test.go covers it.)

// metaTables and metaDocs are the workload's key space: small, so that
// batches meet each other's documents (inserts of existing documents,
// transforms of deleted ones, type clashes).
var (
	metaTables = []string{"t", "u"}
	metaDocs   = 8
)

// metaRequestsPerSeed bounds one run of the workload.
const metaRequestsPerSeed = 200

// metaMissing is a table never created: about one new key in
// metaMissingEvery is sent to it.
const (
	metaMissing      = "gone"
	metaMissingEvery = 25
)

// metaConfig is one way to store and execute the workload.
type metaConfig struct {
	name string
	opts receipt.Options
	// engine: the local engine on a simulated disk (else the reference
	// store); coldValue: terminal receipts go to the value log at
	// checkpoints; reopen: the process restarts halfway through.
	engine, coldValue, reopen bool
}

var metaConfigs = []metaConfig{
	{name: "engine, chained", engine: true, coldValue: true},
	{name: "engine, separate decide", engine: true, coldValue: true, opts: receipt.WithTestKnobs(receipt.Options{}, testknobs.Receipt{SeparateDecide: true})},
	{name: "engine, deferred resolution", engine: true, coldValue: true, opts: receipt.WithTestKnobs(receipt.Options{}, testknobs.Receipt{DeferResolution: true})},
	{name: "engine, no value log, restarted", engine: true, reopen: true},
	{name: "engine, separate decide, deferred, restarted", engine: true, coldValue: true, reopen: true,
		opts: receipt.WithTestKnobs(receipt.Options{}, testknobs.Receipt{SeparateDecide: true, DeferResolution: true})},
	{name: "memstore"},
	{name: "memstore, separate decide, deferred", opts: receipt.WithTestKnobs(receipt.Options{}, testknobs.Receipt{SeparateDecide: true, DeferResolution: true})},
}

// metaRequest is one request of the workload: a key and a batch.
type metaRequest struct {
	table, key, batch string
}

// metaWorkload draws the seed's requests: mostly new keys, some retries of
// an earlier key with its batch (a replay) or with another (a mismatch).
func metaWorkload(seed uint64) []metaRequest {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	var out []metaRequest
	for i := range metaRequestsPerSeed {
		switch p := rng.IntN(10); {
		case p < 2 && len(out) > 0:
			out = append(out, out[rng.IntN(len(out))])
		case p < 3 && len(out) > 0:
			prev := out[rng.IntN(len(out))]
			out = append(out, metaRequest{prev.table, prev.key, metaBatch(rng)})
		default:
			out = append(out, metaRequest{metaTables[rng.IntN(len(metaTables))], fmt.Sprintf("k%d", i), metaBatch(rng)})
			if i%metaMissingEvery == metaMissingEvery-1 {
				out[len(out)-1].table = metaMissing // refused before execution: not_applied
			}
		}
	}
	return out
}

// metaBatch draws one batch of one to three operations on the key space.
func metaBatch(rng *rand.Rand) string {
	var ins, del, tr []string
	seen := map[string]bool{}
	for range 1 + rng.IntN(3) {
		id := fmt.Sprintf("d%d", rng.IntN(metaDocs))
		if seen[id] {
			continue // a batch names a document once
		}
		seen[id] = true
		switch rng.IntN(6) {
		case 0:
			ins = append(ins, fmt.Sprintf(`{"id":%q,"doc":{"n":%d}}`, id, rng.IntN(5)))
		case 1:
			ins = append(ins, fmt.Sprintf(`{"id":%q,"doc":{"n":"text"}}`, id)) // $inc meets a string
		case 2:
			del = append(del, fmt.Sprintf("%q", id))
		default:
			op := []string{"$inc", "$max", "$min", "$addToSet"}[rng.IntN(4)]
			path := map[bool]string{true: "n", false: "s"}[op != "$addToSet"]
			tr = append(tr, fmt.Sprintf(`{"id":%q,"ops":[{"op":%q,"path":%q,"value":%d}],"upsert":%v}`,
				id, op, path, 1+rng.IntN(3), rng.IntN(2) == 0))
		}
	}
	return fmt.Sprintf(`{"inserts":[%s],"deletes":[%s],"transforms":[%s]}`,
		strings.Join(ins, ","), strings.Join(del, ","), strings.Join(tr, ","))
}

// metaRun is one configuration's run: the store under it and the service.
type metaRun struct {
	t     *testing.T
	e     *env
	cfg   metaConfig
	store store.Store
	svc   *receipt.Service
}

func newMetaRun(t *testing.T, cfg metaConfig) *metaRun {
	r := &metaRun{t: t, e: newEnv(t), cfg: cfg}
	r.store = memstore.New()
	if cfg.engine {
		r.store = r.openEngine()
	}
	r.svc = r.e.openOn(r.store, cfg.opts)
	for _, tbl := range metaTables {
		createTable(t, r.svc, tbl)
	}
	return r
}

// openEngine opens the engine on a disk of its own (the env's engine is
// the default configuration's, with the value log).
func (r *metaRun) openEngine() *engine.DB {
	r.t.Helper()
	o := engine.Options{Logger: quiet, FS: r.disk().FS()}
	if r.cfg.coldValue {
		o.ColdValue = receipt.ColdValue
	}
	db, err := engine.Open("/meta", o)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { db.Close() })
	return db
}

// disk is the run's simulated disk, shared by its incarnations.
func (r *metaRun) disk() *memfs.Disk { return r.e.disk }

// restart closes the service and the engine cleanly and opens both again.
func (r *metaRun) restart() {
	r.t.Helper()
	r.svc.Close()
	if err := r.store.(*engine.DB).Close(); err != nil {
		r.t.Fatal(err)
	}
	r.store = r.openEngine()
	r.svc = r.e.openOn(r.store, r.cfg.opts)
}

// checkpoint writes a checkpoint on the engine (cold receipts move to the
// value log), between requests as idemd's loop would.
func (r *metaRun) checkpoint() {
	if db, ok := r.store.(*engine.DB); ok {
		if err := db.Checkpoint(); err != nil {
			r.t.Fatal(err)
		}
	}
}

// execute runs one request and describes its answer in full.
func (r *metaRun) execute(m metaRequest) string {
	r.e.clock.Advance(time.Millisecond)
	a, err := r.svc.Execute(ctx, req(alice, m.table, m.key, mustBatch(r.t, m.batch)))
	if err != nil {
		return "error: " + err.Error()
	}
	return describeAnswer(a)
}

func describeAnswer(a receipt.Answer) string {
	s := fmt.Sprintf("%d %s %s %q retryable=%v retry_with=%s retry=%q txn=%s result=%s terminal=%v replayed=%v state=%v expiry=%v/%v",
		a.Status, a.Outcome, a.Code, a.Message, a.Retryable, a.RetryWith, a.Retry, a.TxnID, a.Result,
		a.Terminal, a.Replayed, a.State, a.Expiry.ReplayUntil.Unix(), a.Expiry.ProtectUntil.Unix())
	if o := a.Original; o != nil {
		s += fmt.Sprintf(" original=%s/%v/%s completed=%v protect=%v same=%v", o.TxnID, o.State, o.Outcome,
			o.Completed.Unix(), o.ProtectUntil.Unix(), o.SameRequest)
		if o.Diff != nil {
			s += fmt.Sprintf(" diff=%+v", *o.Diff)
		}
	}
	return s
}

// run executes the workload and returns its transcript: every answer, then
// every key's first request sent again, then the documents.
func (r *metaRun) run(work []metaRequest) []string {
	var out []string
	first := map[string]metaRequest{}
	for i, m := range work {
		if i > 0 && i%60 == 0 {
			r.checkpoint()
		}
		if r.cfg.reopen && i == len(work)/2 {
			r.restart()
		}
		out = append(out, fmt.Sprintf("request %d %s/%s: %s", i, m.table, m.key, r.execute(m)))
		if _, ok := first[m.table+"/"+m.key]; !ok {
			first[m.table+"/"+m.key] = m
		}
	}
	out = append(out, r.documents("before maintenance")...)
	if _, err := r.svc.MaintainOnce(ctx); err != nil {
		r.t.Fatal(err)
	}
	out = append(out, r.documents("after maintenance")...)
	for _, m := range work {
		if f, ok := first[m.table+"/"+m.key]; ok {
			delete(first, m.table+"/"+m.key)
			out = append(out, fmt.Sprintf("replay %s/%s: %s", f.table, f.key, r.execute(f)))
		}
	}
	return out
}

// documents reads every document of the key space.
func (r *metaRun) documents(when string) []string {
	var out []string
	for _, tbl := range metaTables {
		for d := range metaDocs {
			id := fmt.Sprintf("d%d", d)
			raw, err := r.svc.Tables().Get(ctx, alice, tbl, id)
			out = append(out, fmt.Sprintf("%s: %s/%s = %s (err %v)", when, tbl, id, raw, err))
		}
	}
	return out
}

// TestMetamorphic_EveryFlowAnswersAlikeAndLeavesTheSameDocuments runs one
// seeded workload per seed under every configuration and requires each
// transcript — answers, replays, documents — to equal the first
// configuration's, line by line.
func TestMetamorphic_EveryFlowAnswersAlikeAndLeavesTheSameDocuments(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		work := metaWorkload(seed)
		var want []string
		for i, cfg := range metaConfigs {
			got := newMetaRun(t, cfg).run(work)
			if i == 0 {
				want = got
				wantVariety(t, seed, got)
				continue
			}
			if len(got) != len(want) {
				t.Fatalf("seed %d, %s: %d transcript lines, %s: %d", seed, cfg.name, len(got), metaConfigs[0].name, len(want))
			}
			for l := range got {
				if got[l] != want[l] {
					t.Fatalf("seed %d: %s and %s diverge at\n%s\n%s", seed, metaConfigs[0].name, cfg.name, want[l], got[l])
				}
			}
		}
	}
}

// wantVariety fails a workload too tame to compare flows: it must commit,
// abort on a document conflict and on an invalid transform, refuse a
// missing table before execution, replay, and refuse a mismatched retry.
func wantVariety(t *testing.T, seed uint64, transcript []string) {
	t.Helper()
	all := strings.Join(transcript, "\n")
	for _, want := range []string{" committed ", " aborted ", " not_applied table_not_found ", "replayed=true", "idempotency_key_mismatch", "not a number"} {
		if !strings.Contains(all, want) {
			t.Fatalf("seed %d: no answer contains %q; the workload does not exercise the flows:\n%s", seed, want, all)
		}
	}
}
