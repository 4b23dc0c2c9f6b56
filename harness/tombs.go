package harness

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// Tombstones (receipt/tombstone.go): the cleaner leaves one where it
// deletes a terminal receipt protected beyond its retention, and while it
// lasts the key is refused — 409 idempotency_key_expired — and never
// executes. The harness follows each key through that life: a generation
// whose receipt was cleaned into a tombstone is followed by a spent one,
// whose every request is sent while the tombstone lasts and must be
// refused; only once the tombstone is gone is the next generation a new
// request. None of a spent generation's batches may ever leave a marker
// or an increment (checkInvariants, and the docs model: effectHistory).

// keyTomb is what the harness knows of a key's tombstone.
type keyTomb struct {
	gen     int    // the generation whose receipt it stands for
	outcome string // that generation's outcome as the store showed it ("": never seen)
	first   *receipt.Original
}

// tombKeyOf is tomb/v1/<the 16 bytes of txn id>; nil for an ID that is not
// 32 hex digits (a session's).
func tombKeyOf(id string) []byte { return receipt.TombstoneKey(id) }

// tombVal is a decoded tombstone, as the audit compares it with the
// receipt it stands for.
type tombVal struct {
	outcome                 string
	fp                      [8]byte
	completed, protectUntil int64 // unix ms
}

func decodeTombVal(v []byte) (tombVal, bool) {
	t, err := receipt.DecodeTombstone("", v)
	if err != nil {
		return tombVal{}, false
	}
	return tombVal{outcome: t.Outcome, fp: t.Fingerprint, completed: t.Completed.UnixMilli(), protectUntil: t.ProtectUntil.UnixMilli()}, true
}

// tombstones reads every tombstone, by transaction ID.
func (sc *scenario) tombstones() map[string]tombVal {
	out := map[string]tombVal{}
	for _, it := range sc.scanAll([]byte(store.NSTomb)) {
		id := hex.EncodeToString(store.NSTomb.Suffix(it.Key))
		v, ok := decodeTombVal(it.Value)
		if !ok {
			sc.violate("undecodable tombstone of " + id)
		}
		out[id] = v
	}
	return out
}

func (sc *scenario) hasTomb(k int) bool {
	_, err := sc.cl.store.Get(context.Background(), tombKeyOf(txnOf(k)))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		sc.violate(fmt.Sprintf("read the tombstone of key %d: %v", k, err))
	}
	return err == nil
}

// markSent records that key k is sent in its current generation: a spent
// one if its tombstone lasts.
func (sc *scenario) markSent(k int) {
	sc.sent[k] = true
	if sc.tombs[k] != nil {
		sc.obs.spent[keyGen{k, sc.gens[k]}] = true
	}
}

// newGenerations gives every key sent in its generation whose receipt is
// gone a new generation — spent while the cleaner's tombstone lasts — and
// every key whose tombstone is gone a new one after its spent generation.
// A store that fail-stopped is restarted first: its reads do not show what
// is durable (a write whose outcome was ambiguous may be in the log and
// not in the tree).
func (sc *scenario) newGenerations() {
	sc.recoverStore()
	for k := range sc.sent {
		if sc.tombs[k] != nil {
			if !sc.hasTomb(k) {
				sc.tombs[k] = nil
				sc.count("tombstones-cleaned")
				if sc.sent[k] {
					sc.gens[k]++
					sc.sent[k] = false
				}
				sc.reborn[keyGen{k, sc.gens[k]}] = true
			}
			continue
		}
		if !sc.sent[k] {
			continue
		}
		_, err := sc.cl.store.Get(context.Background(), receiptKey(k))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			// Not gone: unreadable (a receipt vlog-damage damaged).
			if !bytes.Equal(receiptKey(k), sc.damaged) {
				sc.violate(fmt.Sprintf("read the receipt of key %d: %v", k, err))
			}
			continue
		}
		if err != nil {
			kg := keyGen{k, sc.gens[k]}
			sc.gens[k]++
			sc.sent[k] = false
			sc.count("cleaned-keys")
			if sc.hasTomb(k) {
				sc.tombs[k] = &keyTomb{gen: kg.gen, outcome: sc.obs.settled[kg].outcome}
				sc.count("tombstoned-keys")
			}
		}
	}
	sc.cleanSessions()
}

// expiredAnswer checks a 409 idempotency_key_expired answer to a batch of
// key k, generation gen (resend: with the cleaned generation's batch): the
// harness saw the key's receipt cleaned into a tombstone that still
// lasts; the answer names the key's transaction and, as its original, the
// outcome the cleaned receipt had, protected Options.TombstoneRetention
// past its completion; it says whether this is the request that ran; and
// every refusal of one tombstone tells the same original.
func (sc *scenario) expiredAnswer(k, gen int, resend bool, ans receipt.Answer) opOutput {
	sc.count("expired-answers")
	if resend {
		sc.count("expired-resends")
	}
	bad := func(format string, args ...any) {
		sc.violate(fmt.Sprintf("key %d gen %d: %s: ", k, gen, code.KeyExpired) + fmt.Sprintf(format, args...))
	}
	t, id, o := sc.tombs[k], txnOf(k), ans.Original
	const ms = time.Millisecond
	switch {
	case t == nil:
		bad("the harness never saw its receipt cleaned into a tombstone that lasts")
	case ans.Status != 409 || ans.Terminal || ans.TxnID != id:
		bad("status %d terminal %v txn %s, want 409, not terminal, txn %s", ans.Status, ans.Terminal, ans.TxnID, id)
	case o == nil || o.TxnID != id || o.State != receipt.Expired:
		bad("original %+v, want txn %s expired", o, id)
	case t.outcome != "" && o.Outcome != t.outcome:
		bad("original outcome %s, but generation %d's receipt was %s", o.Outcome, t.gen, t.outcome)
	case o.SameRequest != resend:
		bad("same request %v, but the harness resent the cleaned generation's batch: %v", o.SameRequest, resend)
	case (o.ProtectUntil.Sub(o.Completed) - sc.cfg.TombstoneRetention).Abs() > ms:
		bad("protected %v after completion, want Options.TombstoneRetention %v", o.ProtectUntil.Sub(o.Completed), sc.cfg.TombstoneRetention)
	}
	if t != nil && o != nil {
		sc.mu.Lock()
		first := t.first
		if first == nil {
			t.first = o
		}
		sc.mu.Unlock()
		if first != nil && (first.Outcome != o.Outcome || !first.Completed.Equal(o.Completed) || !first.ProtectUntil.Equal(o.ProtectUntil)) {
			bad("original %+v, but the tombstone's first refusal said %+v", o, first)
		}
	}
	return opOutput{Class: outExpired}
}

// checkTombs, once the system is stable: no tombstone beside its receipt;
// every tombstone is of a transaction the harness ran; a workload key has
// one exactly when the harness knows it has.
func (sc *scenario) checkTombs() {
	known := map[string]bool{}
	for _, s := range sc.sessions {
		known[s.txn] = true
	}
	tombs := sc.tombstones()
	ids := slices.Sorted(maps.Keys(tombs))
	for _, id := range ids {
		if _, err := sc.cl.store.Get(context.Background(), store.NSReceipt.Key(id)); err == nil {
			sc.violate("receipt " + id + " exists beside its tombstone")
		}
	}
	for k := range sc.tombs {
		id := txnOf(k)
		known[id] = true
		if _, ok := tombs[id]; ok != (sc.tombs[k] != nil) {
			sc.violate(fmt.Sprintf("key %d: a tombstone in the store %v, but the harness saw one %v", k, ok, sc.tombs[k] != nil))
		}
	}
	for _, id := range ids {
		if !known[id] {
			sc.violate("a tombstone of " + id + ", a transaction the harness never ran")
		}
	}
}
