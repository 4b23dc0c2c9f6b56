package table

import (
	"context"

	"github.com/idemdb/idem/store"
)

// StageDirect stages the shard's documents as Prepare does and counts what
// AppendDirect adds (twopc.DirectCommitter).
//
// It reads the documents' newest sequenced versions (store.LatestReader),
// durable or not: a direct commit is one write, conditioned on those
// versions and sequenced after them, so it is never durable without them
// — and its answer waits for it. This is what lets a keyed batch stage on
// the one before it while that one waits for its fsync (issue 37).
func (s *Shard) StageDirect(ctx context.Context, txnID string) (conds, ops int, err error) {
	s.latest = true
	err = s.stageAll(ctx)
	s.latest = false
	if err != nil {
		return 0, 0, err
	}
	conds = 1 // the table as planned
	for _, st := range s.staged {
		c, o := st.commitSize()
		conds, ops = conds+c, ops+o
	}
	return conds, ops, nil
}

// AppendDirect adds to b, in place of intents, what committing the staged
// documents writes (twopc.DirectCommitter): a chained commit carries it in
// its decision link, CommitOnce in its one write. Its conditions are those
// Prepare's vote rests on — the table as planned, no open intent on a
// document, every document read still at the version read — so Refusal
// explains a failed one as it does Prepare's. It is the fast path's write
// (commitTo) for one shard; nothing is staged for ResolveStaged or
// Resolve, as no intent is ever written.
func (s *Shard) AppendDirect(b *store.Batch) {
	b.AtVersion(s.metaKey(), s.meta.Version)
	for _, st := range s.staged {
		st.commitTo(b)
	}
}

// commitTo adds to b st's document written directly, with no intent, under
// the conditions that make it safe: no open intent on the document, and the
// document still at the version read when the result depends on it. The
// fast path and AppendDirect share it.
func (st staged) commitTo(b *store.Batch) {
	// commitSize counts what this adds: keep the two in step.
	b.Absent(st.intentKey)
	if st.condOnBase {
		b.AtVersion(st.docKey, st.base)
	}
	switch {
	case st.read:
	case !st.deleted:
		b.Put(st.docKey, st.doc)
	case !st.condOnBase || st.base != 0:
		// A delete of a document read as absent writes nothing: its
		// condition holds it absent.
		b.Delete(st.docKey)
	}
}

// commitSize is how many conditions and ops commitTo adds.
func (st staged) commitSize() (conds, ops int) {
	conds = 1
	if st.condOnBase {
		conds++
	}
	switch {
	case st.read:
	case !st.deleted, !st.condOnBase || st.base != 0:
		ops = 1
	}
	return conds, ops
}
