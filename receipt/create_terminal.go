package receipt

import (
	"context"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/twopc"
)

// createTerminal publishes a new receipt already terminal, in the one
// write that commits its transaction (twopc.CommitOnce): the receipt's and
// its tombstone's absence, every shard's commit, the committed receipt with
// its whole envelope and its retention entry. A write that is whole or
// absent leaves a successor nothing to finish or to learn: the receipt is
// never pending or started in the store, and has no lease, no recovery
// entry and no retained 2PC record. On a shared store (etcd) another node
// therefore sees nothing of a request in flight here and may send its own
// write for the key: the receipt's absence condition lets one win, and the
// loser's failed write brings back the winner's receipt to answer from
// (docs/etcd.md, "One write per keyed request"). done is false when
// nothing was written and the caller goes on with Begin; a failed
// condition of the receipt's own (it exists, or its tombstone) is answered
// here, a lost race, with no Begin to learn what Begin would fail on too.
func (fl *flow) createTerminal(ctx context.Context, a *attempt, txn twopc.Txn) (ans Answer, done bool, err error) {
	var env Envelope
	publish := func(result []byte, b *store.Batch) error {
		env = envelopeOf(twopc.Committed{Result: result}, a.id)
		k := a.keys()
		fl.addAbsentReceipt(b, k)
		if a.alongside != nil {
			if err := a.alongside(b); err != nil {
				return err
			}
		}
		now := fl.core.clock.Now()
		t := fl.terminal(a, env, now)
		t.Started = now.UnixMilli()
		val, err := EncodeRecord(&t)
		if err != nil {
			return err
		}
		a.final = &t
		b.Put(k.receipt, val).Put(expiryKey(t.RetainUntil, a.id), nil)
		return nil
	}
	_, ok, err := fl.core.coord.CommitOnce(ctx, txn, publish)
	if !ok {
		a.final = nil // the record it built was not written
		if err == nil {
			return Answer{}, false, nil
		}
		ans, err := fl.notDone(a, err)
		return ans, true, err
	}
	a.publishedOnce()
	fl.core.stats.executed.Add(1)
	fl.core.countTerminal(env)
	if err != nil { // a failpoint after the durable write
		return Answer{}, true, err
	}
	return Answer{Envelope: env, Terminal: true}, true, nil
}
