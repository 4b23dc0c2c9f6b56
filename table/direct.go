package table

import (
	"context"

	"github.com/idemdb/idem/engine"
)

// CommitDirect stages the shard's documents as Prepare does and returns,
// in place of intents, what committing them writes (twopc.DirectCommitter):
// a chained commit carries it in its decision link. Its conditions are
// those Prepare's vote rests on — the table as planned, no open intent on a
// document, every document read still at the version read — so Refusal
// explains a failed one as it does Prepare's. It is the fast path's write
// (commitTo) for one shard; nothing is staged for ResolveStaged or
// Resolve, as no intent is ever written.
func (s *Shard) CommitDirect(ctx context.Context, txnID string) (*engine.Batch, error) {
	if err := s.stageAll(ctx); err != nil {
		return nil, err
	}
	b := new(engine.Batch).Grow(1+2*len(s.staged), len(s.staged)).AtVersion(s.metaKey(), s.meta.Version)
	for _, st := range s.staged {
		st.commitTo(b)
	}
	return b, nil
}

// commitTo adds to b st's document written directly, with no intent, under
// the conditions that make it safe: no open intent on the document, and the
// document still at the version read when the result depends on it. The
// fast path and CommitDirect share it.
func (st staged) commitTo(b *engine.Batch) {
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
