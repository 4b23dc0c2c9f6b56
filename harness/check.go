package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/anishathalye/porcupine"

	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
)

func receiptKey(k int) []byte { return store.NSReceipt.Key(txnOf(k)) }

// scanAll reads every key under prefix but the one vlog-damage damaged
// (sc.damaged), if it is there.
func (sc *scenario) scanAll(prefix []byte) []store.Item {
	items, err := sc.scanRange(prefix, store.PrefixEnd(prefix), sc.damaged)
	if err != nil {
		sc.violate("scan " + string(prefix) + ": " + err.Error())
	}
	return items
}

// scanRange reads every key in [start, end), page by page, but skip (nil:
// none) — a key whose value reads as damage, which would fail every scan
// that meets it.
func (sc *scenario) scanRange(start, end, skip []byte) ([]store.Item, error) {
	if skip != nil && bytes.Compare(start, skip) <= 0 && bytes.Compare(skip, end) < 0 {
		before, err := sc.scanRange(start, skip, nil)
		if err != nil {
			return nil, err
		}
		after, err := sc.scanRange(append(slices.Clone(skip), 0), end, nil)
		return append(before, after...), err
	}
	var out []store.Item
	limit := sc.cl.store.Limits().ScanItemsMax // the store's page, not the engine's
	for bytes.Compare(start, end) < 0 {
		items, err := sc.cl.store.Scan(context.Background(), start, end, limit)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if len(items) < limit {
			break
		}
		start = append(slices.Clone(items[len(items)-1].Key), 0)
	}
	return out, nil
}

// checkStarted: no started receipt without a retained 2PC record (its
// coordinator record or its decision).
func (sc *scenario) checkStarted() {
	ctx := context.Background()
	for _, it := range sc.scanAll([]byte(store.NSReceipt)) {
		rec, err := receipt.DecodeRecord(it.Value)
		if err != nil {
			sc.violate("undecodable receipt " + string(it.Key))
			continue
		}
		if rec.State != receipt.Started {
			continue
		}
		id := string(store.NSReceipt.Suffix(it.Key))
		_, errRec := sc.cl.store.Get(ctx, store.NSTxn.Key("rec", id))
		_, errDec := sc.cl.store.Get(ctx, store.NSTxn.Key("dec", id))
		if errors.Is(errRec, store.ErrNotFound) && errors.Is(errDec, store.ErrNotFound) {
			// Re-read: it may have become terminal meanwhile.
			if cur, err := sc.cl.store.Get(ctx, it.Key); err == nil {
				if r, err := receipt.DecodeRecord(cur.Value); err == nil && r.State == receipt.Started {
					sc.violate("started receipt without a retained 2PC record: " + id)
				}
			}
		}
	}
}

// observe records, for every key sent in its current generation, when its
// receipt is first seen terminal (see effectHistory). It runs between steps,
// before anything can delete a receipt.
func (sc *scenario) observe() {
	ctx := context.Background()
	for k := range sc.gens {
		kg := keyGen{k, sc.gens[k]}
		if _, done := sc.obs.settled[kg]; done || !sc.sent[k] {
			continue
		}
		it, err := sc.cl.store.Get(ctx, receiptKey(k))
		if err != nil {
			continue
		}
		rec, err := receipt.DecodeRecord(it.Value)
		if err != nil || rec.State != receipt.Terminal {
			continue
		}
		e := receipt.EnvelopeOf(rec, txnOf(k))
		class := outNotApplied
		if e.Outcome == receipt.OutcomeCommitted {
			class = outCommitted
		}
		sc.obs.settled[kg] = settled{at: sc.rec.now(), class: class, env: envString(e), outcome: e.Outcome}
		if sc.reborn[kg] {
			sc.count("expired-keys-ran-again") // after their tombstone's cleanup
		}
	}
}

// unstable lists what keeps the system from being stable.
func (sc *scenario) unstable() []string {
	var out []string
	for _, it := range sc.scanAll([]byte(store.NSReceipt)) {
		rec, err := receipt.DecodeRecord(it.Value)
		if err == nil && (rec.State != receipt.Terminal || rec.Debt != 0) {
			out = append(out, fmt.Sprintf("receipt %s %s debt=%d", store.NSReceipt.Suffix(it.Key), rec.State, rec.Debt))
		}
	}
	for _, it := range sc.scanAll(store.NSTxn.Prefix("rec")) {
		out = append(out, "open transaction "+string(it.Key))
	}
	for _, it := range sc.scanAll([]byte(store.NSIntent)) {
		out = append(out, "intent "+string(it.Key))
	}
	// Every session ended: committed, aborted, expired or presumed aborted.
	for _, it := range sc.scanAll(store.NSSession.Prefix("open")) {
		out = append(out, "open session entry "+string(it.Key))
	}
	for _, it := range sc.scanAll(store.NSSession.Prefix("rec")) {
		if rec, err := receipt.DecodeSession(it.Value); err != nil || rec.State == receipt.SessionOpen {
			out = append(out, "open session "+string(it.Key))
		}
	}
	return out
}

func (sc *scenario) stable() bool { return len(sc.unstable()) == 0 }

// checkInvariants runs once the system is stable (as an actor: it reads
// documents through a node).
func (sc *scenario) checkInvariants(ctx context.Context) {
	for _, s := range sc.unstable() {
		sc.violate("after stabilization: " + s) // includes orphaned intents
	}
	sc.checkStarted()
	tables := sc.cl.nodes[sc.cl.live()[0]].svc.Tables()
	sc.checkTombs()
	markers := map[[2]int]bool{}
	for k := range sc.gens {
		sc.checkMarkers(ctx, tables, k, markers)
		sc.checkReceiptOutcome(ctx, k, markers)
	}
	sc.checkCounters(ctx, tables, markers)
}

// checkMarkers reads key k's generations' markers into markers and flags
// any that disagrees with what the run observed. A generation seen
// terminal left its marker exactly when it committed — cleaned since or
// not: a request resent while its tombstone lasts (the same batch) must
// not run it again.
func (sc *scenario) checkMarkers(ctx context.Context, tables *table.Tables, k int, markers map[[2]int]bool) {
	for g := 0; g <= sc.gens[k]; g++ {
		_, err := tables.Get(ctx, principal, tableName, markerID(k, g))
		if err != nil && !isCode(err, "document_not_found") {
			sc.violate(fmt.Sprintf("read marker %s: %v", markerID(k, g), err))
			continue
		}
		present, kg := err == nil, keyGen{k, g}
		if s, ok := sc.obs.settled[kg]; ok && present != (s.class == outCommitted) {
			sc.violate(fmt.Sprintf("key %d gen %d was %s, but its marker present=%v", k, g, s.outcome, present))
		}
		switch {
		case present && sc.obs.spent[kg]:
			// Not counted either: the counters must show it did not run.
			sc.violate(fmt.Sprintf("key %d gen %d was sent only while its key's tombstone lasted, yet its marker exists: an expired key produced a second effect", k, g))
		case present:
			markers[[2]int{k, g}] = true
		}
	}
}

// checkReceiptOutcome flags a terminal receipt of key k whose documents
// disagree with its outcome.
func (sc *scenario) checkReceiptOutcome(ctx context.Context, k int, markers map[[2]int]bool) {
	it, err := sc.cl.store.Get(ctx, receiptKey(k))
	if err != nil {
		return
	}
	rec, err := receipt.DecodeRecord(it.Value)
	if err != nil || rec.Envelope == nil {
		sc.violate(fmt.Sprintf("key %d: receipt without envelope", k))
		return
	}
	committed := rec.Envelope.Outcome == receipt.OutcomeCommitted
	if committed != markers[[2]int{k, sc.gens[k]}] {
		sc.violate(fmt.Sprintf("key %d gen %d: receipt outcome %s but marker present=%v",
			k, sc.gens[k], rec.Envelope.Outcome, !committed))
	}
}

// checkCounters: every counter equals the number of committed batches
// that touched it, plus what the sessions that applied staged on it;
// table u's counters (d >= Docs) only the latter.
func (sc *scenario) checkCounters(ctx context.Context, tables *table.Tables, markers map[[2]int]bool) {
	adds := sc.checkSessions(ctx, tables)
	for d := 0; d < sc.counters(); d++ {
		want := adds[d]
		for kg := range markers {
			for _, dd := range docsOfKey(kg[0], sc.cfg.Docs) {
				if dd == d {
					want++
				}
			}
		}
		got := 0
		tbl, id := sc.counterRef(d)
		if doc, err := tables.Get(ctx, principal, tbl, id); err == nil {
			var v struct{ N int }
			_ = json.Unmarshal(doc, &v)
			got = v.N
		}
		if got != want {
			sc.violate(fmt.Sprintf("counter %s/%s = %d, but committed batches and sessions add up to %d (sessions: %d)", tbl, id, got, want, adds[d]))
		}
	}
}

// checkHistory checks both models; a failing or inconclusive check is a
// failure, with its visualization written to OutDir.
func (sc *scenario) checkHistory() []string {
	h := sc.rec.history()
	var vis []string
	for _, m := range []struct {
		name    string
		model   porcupine.Model
		history []porcupine.Operation
	}{{"keys", keyModel(), h}, {"docs", docModel(), effectHistory(h, sc.obs)}} {
		res, info := porcupine.CheckOperationsVerbose(m.model, m.history, checkTimeout)
		if res == porcupine.Ok {
			continue
		}
		msg := fmt.Sprintf("linearizability (%s model): %s", m.name, res)
		if sc.cfg.OutDir != "" {
			path := filepath.Join(sc.cfg.OutDir, fmt.Sprintf("seed-%d-%s.html", sc.cfg.Seed, m.name))
			if err := os.MkdirAll(sc.cfg.OutDir, 0o755); err == nil {
				if err := porcupine.VisualizePath(m.model, info, path); err == nil {
					vis = append(vis, path)
					msg += " — visualization: " + path
				}
			}
		}
		sc.violate(msg)
	}
	return vis
}
