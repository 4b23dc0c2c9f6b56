package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/table"
)

// The workload: keys k0..kK-1 (and, beyond them, the keys faults send
// requests with), counters c0..cD-1. The batch of key k in generation g
// increments counter n on one or two counters and inserts the marker
// document m-k-g, so a committed batch is visible both in the counters and
// as its marker. In the hot-document workload (Config.Hot) the batch
// creates its marker by an upserting $inc instead, so that it only
// increments.
const (
	principal = "harness"
	tableName = "t"
)

func keyName(k int) string       { return fmt.Sprintf("key-%02d", k) }
func counterID(d int) string     { return fmt.Sprintf("c%d", d) }
func markerID(k, gen int) string { return fmt.Sprintf("m-%d-%d", k, gen) }
func txnOf(k int) string         { return receipt.Bind(principal, tableName, keyName(k)) }
func docsOfKey(k, docs int) []int {
	if k%3 == 2 || docs == 1 {
		return []int{k % docs}
	}
	return []int{k % docs, (k + 1) % docs}
}

func batchFor(k, gen, docs int, hot bool) *table.Batch {
	inc := func(id string) table.Transform {
		return table.Transform{ID: id, Upsert: true, Ops: []table.Op{{Op: table.OpInc, Path: "n", Value: json.RawMessage("1")}}}
	}
	b := &table.Batch{}
	if hot {
		b.Transforms = append(b.Transforms, inc(markerID(k, gen)))
	} else {
		b.Inserts = []table.Insert{{ID: markerID(k, gen), Doc: json.RawMessage(fmt.Sprintf(`{"key":%d,"gen":%d}`, k, gen))}}
	}
	for _, d := range docsOfKey(k, docs) {
		b.Transforms = append(b.Transforms, inc(counterID(d)))
	}
	return b
}

// envString renders a terminal envelope; two answers are the same answer
// exactly when these strings are equal.
func envString(e receipt.Envelope) string {
	return fmt.Sprintf("%d|%s|%s|%q|%v|%s|%s|%s", e.Status, e.Outcome, e.Code, e.Message, e.Retryable, e.RetryWith, e.TxnID, e.Result)
}

// client is one simulated client. After an operation with an unknown
// outcome it continues under a fresh porcupine client ID, since that
// operation never "returns".
type client struct {
	slot int // its place among the step's clients (-1: the harness's own)
	id   int
	rng  *rand.Rand
	sess *sessionClient // a session client (nil: keyed batches and reads)
}

// doBatch sends key k's batch to node n and records the operation. It
// returns true if the node hit an injected crash.
func (sc *scenario) doBatch(ctx context.Context, cl *client, n *node, k int) bool {
	return sc.sendBatch(ctx, cl, n, k, 0, false)
}

// doBatchWait is doBatch with Prefer: wait.
func (sc *scenario) doBatchWait(ctx context.Context, cl *client, n *node, k int, wait time.Duration) bool {
	return sc.sendBatch(ctx, cl, n, k, wait, false)
}

// sendBatch is doBatchWait, and with resend — for a key whose tombstone
// lasts — the batch of the generation that tombstone stands for.
func (sc *scenario) sendBatch(ctx context.Context, cl *client, n *node, k int, wait time.Duration, resend bool) bool {
	_, err := sc.batchOp(ctx, cl, n, k, wait, resend)
	return errors.Is(err, fault.ErrInjected)
}

// batchOp is sendBatch's operation, recorded: it returns the answer and
// the error.
func (sc *scenario) batchOp(ctx context.Context, cl *client, n *node, k int, wait time.Duration, resend bool) (receipt.Answer, error) {
	gen, tomb := sc.gens[k], sc.tombs[k]
	batchGen := gen
	if resend = resend && tomb != nil; resend {
		batchGen = tomb.gen
	}
	in := opInput{Kind: opBatch, Key: k, Gen: gen, Resend: resend, Docs: docsOfKey(k, sc.cfg.Docs)}
	call := sc.rec.now()
	ans, err := sc.execute(ctx, n, k, batchGen, wait)
	ret := sc.rec.now()
	out := opOutput{Class: outUnknown}
	switch {
	case err != nil:
	case ans.Code == code.KeyExpired:
		out = sc.expiredAnswer(k, gen, resend, ans)
	case ans.Terminal && ans.Outcome == receipt.OutcomeCommitted:
		out = opOutput{Class: outCommitted, Env: envString(ans.Envelope)}
	case ans.Terminal:
		out = opOutput{Class: outNotApplied, Env: envString(ans.Envelope)}
	case ans.Code == code.KeyMismatch:
		sc.violate(fmt.Sprintf("key %d gen %d: idempotency_key_mismatch for the same request", k, gen))
	}
	if sc.cfg.Hot && ans.Code == code.TransactionConflict {
		sc.hotRefused(k, gen, ans.Message)
	}
	if tomb != nil && (out.Class == outCommitted || out.Class == outNotApplied) {
		// No cleaner runs while clients do: the tombstone was there
		// throughout, and the key must have been refused.
		sc.violate(fmt.Sprintf("key %d gen %d: answered %s %s while its tombstone lasts: an expired key ran again", k, gen, out.Class, out.Env))
	}
	sc.rec.record(cl.id, in, call, out, ret)
	sc.countOp(out.Class.String())
	if out.Class == outUnknown {
		cl.id = sc.rec.newClient()
	}
	return ans, err
}

// execute sends key k's batch of generation gen. Keys of one parity come
// as idemd's API sends them — bytes, whose digest the receipt keeps, and a
// verbatim replay tried first and what it read passed on to Execute
// (receipt.ReplayVerbatimOrSeen) — the others as a
// library caller sends them, a decoded batch alone: both replay paths run
// under every fault.
func (sc *scenario) execute(ctx context.Context, n *node, k, gen int, wait time.Duration) (receipt.Answer, error) {
	b := batchFor(k, gen, sc.cfg.Docs, sc.cfg.Hot)
	req := receipt.Request{Principal: principal, Table: tableName, Key: keyName(k), Batch: b, Wait: wait}
	if k%2 == 0 {
		body, err := json.Marshal(b)
		if err != nil {
			return receipt.Answer{}, err
		}
		req.BodyDigest = receipt.BodyDigest(body)
		ans, ok, seen := n.svc.ReplayVerbatimOrSeen(ctx, principal, tableName, req.Key, time.Time{}, req.BodyDigest)
		if ok {
			return ans, nil
		}
		req.Seen = seen
	}
	return n.svc.Execute(ctx, req)
}

// doRead reads counter d (table u's when d >= Config.Docs) through node
// n. Failed reads say nothing and are not recorded.
func (sc *scenario) doRead(ctx context.Context, cl *client, n *node, d int) {
	in := opInput{Kind: opRead, Docs: []int{d}}
	tbl, id := sc.counterRef(d)
	call := sc.rec.now()
	doc, err := n.svc.Tables().Get(ctx, principal, tbl, id)
	ret := sc.rec.now()
	value := 0
	switch {
	case err == nil:
		var v struct{ N int }
		if json.Unmarshal(doc, &v) != nil {
			sc.violate(fmt.Sprintf("counter %s/%s is not a counter: %s", tbl, id, doc))
			return
		}
		value = v.N
	case isCode(err, code.DocumentNotFound):
	default:
		return
	}
	sc.rec.record(cl.id, in, call, opOutput{Value: value}, ret)
	sc.countOp("reads")
}

func isCode(err error, c code.Code) bool {
	var ce *code.Error
	return errors.As(err, &ce) && ce.Code == c
}
