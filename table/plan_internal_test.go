package table

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/idemdb/idem/store"
)

// TestPlan_SplitsLikeAMapOfShards: plan's counting sort gives what the
// obvious split gives — every touched shard once, in shard order, each with
// exactly its documents in batch order (inserts, deletes, transforms) — for
// random batches over every shard count up to ShardsMax, batches larger
// than the stack's shard array included.
func TestPlan_SplitsLikeAMapOfShards(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 31))
	for round := range 400 {
		shards := 1 + rng.IntN(ShardsMax)
		if round%7 == 0 {
			shards = ShardsMax
		}
		b := &Batch{}
		n := 1 + rng.IntN(3*planInPlaceDocs)
		for i := range n {
			id := fmt.Sprintf("d%d-%d", i, rng.Uint32())
			switch rng.IntN(3) {
			case 0:
				b.Inserts = append(b.Inserts, Insert{ID: id, Doc: []byte(`{}`)})
			case 1:
				b.Deletes = append(b.Deletes, id)
			default:
				b.Transforms = append(b.Transforms, Transform{ID: id, Ops: []Op{{Op: "$set", Path: "a", Value: []byte("1")}}})
			}
		}
		if err := b.Validate(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		p := (&Tables{}).plan(Meta{ID: "tid", Name: "t", Shards: shards}, b)

		want := map[int][]string{}
		kinds := map[string]docKind{}
		for _, in := range b.Inserts {
			kinds[in.ID] = kindInsert
		}
		for _, id := range b.Deletes {
			kinds[id] = kindDelete
		}
		for _, tr := range b.Transforms {
			kinds[tr.ID] = kindTransform
		}
		for i := range b.docCount() {
			k := ShardOf(b.docID(i), shards)
			want[k] = append(want[k], b.docID(i))
		}
		if len(p.Shards) != len(want) {
			t.Fatalf("round %d: %d shards, want %d", round, len(p.Shards), len(want))
		}
		for j, s := range p.Shards {
			if j > 0 && p.Shards[j-1].shard >= s.shard {
				t.Fatalf("round %d: shard %d after %d", round, s.shard, p.Shards[j-1].shard)
			}
			ids := want[s.shard]
			if len(s.docs) != len(ids) || cap(s.docs) != len(s.docs) {
				t.Fatalf("round %d shard %d: %d docs (cap %d), want %d", round, s.shard, len(s.docs), cap(s.docs), len(ids))
			}
			for i, w := range s.docs {
				if w.id != ids[i] || w.kind != kinds[w.id] {
					t.Fatalf("round %d shard %d doc %d: %q kind %d, want %q kind %d", round, s.shard, i, w.id, w.kind, ids[i], kinds[ids[i]])
				}
			}
		}
	}
}

// TestCommitSize_CountsWhatCommitToAdds: StageDirect sizes the one batch
// of a direct commit by commitSize, so it must count exactly what commitTo
// adds, for every shape a staged document takes.
func TestCommitSize_CountsWhatCommitToAdds(t *testing.T) {
	for _, base := range []store.Version{0, 7} {
		for mask := range 8 {
			st := staged{docKey: []byte("d"), intentKey: []byte("i"), base: base,
				condOnBase: mask&1 != 0, deleted: mask&2 != 0, read: mask&4 != 0, doc: []byte("{}")}
			b := new(store.Batch)
			st.commitTo(b)
			if conds, ops := st.commitSize(); conds != len(b.Conds) || ops != len(b.Ops) {
				t.Errorf("%+v: commitSize %d conds %d ops, commitTo added %d and %d", st, conds, ops, len(b.Conds), len(b.Ops))
			}
		}
	}
}
