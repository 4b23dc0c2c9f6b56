package harness

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
)

func batchOp(client, key int, call int64, class outClass, ret int64) porcupine.Operation {
	op := porcupine.Operation{ClientId: client, Input: opInput{Kind: opBatch, Key: key, Docs: []int{0}},
		Call: call, Output: opOutput{Class: class, Env: "e"}, Return: ret}
	if class == outUnknown {
		op.Output, op.Return = opOutput{}, math.MaxInt64
	}
	return op
}

func readOp(client int, call int64, value int, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: opInput{Kind: opRead, Docs: []int{0}},
		Call: call, Output: opOutput{Value: value}, Return: ret}
}

// TestModels_EffectHistoryKeepsVerdicts: checking one effect per key, over
// the interval the run proves, accepts a correct history (an attempt lost to
// a crash whose effect a later replay confirms) and still rejects a double
// application, an effect behind a "not applied" answer, and a read that
// misses a committed batch.
func TestModels_EffectHistoryKeepsVerdicts(t *testing.T) {
	cases := []struct {
		name string
		h    []porcupine.Operation
		ok   bool
	}{
		{"lost attempt, later replay committed", []porcupine.Operation{
			batchOp(0, 1, 1, outUnknown, 2), readOp(1, 3, 1, 4), batchOp(2, 1, 5, outCommitted, 6), readOp(1, 7, 1, 8)}, true},
		{"effect before the unknown attempt returned", []porcupine.Operation{
			batchOp(0, 1, 1, outUnknown, 10), readOp(1, 2, 1, 3), batchOp(2, 1, 11, outCommitted, 12)}, true},
		{"applied twice", []porcupine.Operation{
			batchOp(0, 1, 1, outUnknown, 2), batchOp(2, 1, 3, outCommitted, 4), readOp(1, 5, 2, 6)}, false},
		{"visible before its first attempt", []porcupine.Operation{
			readOp(1, 1, 1, 2), batchOp(0, 1, 3, outCommitted, 4)}, false},
		{"applied behind not_applied", []porcupine.Operation{
			batchOp(0, 1, 1, outUnknown, 2), batchOp(2, 1, 3, outNotApplied, 4), readOp(1, 5, 1, 6)}, false},
		{"read misses a committed batch", []porcupine.Operation{
			batchOp(0, 1, 1, outCommitted, 2), readOp(1, 3, 0, 4)}, false},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperations(docModel(), effectHistory(c.h, observations{})); got != c.ok {
			t.Errorf("%s: linearizable=%v, want %v", c.name, got, c.ok)
		}
	}
}

// commitOp is session s's commit on counters docs (adding incs, having
// seen each at seen, -1: unknown).
func commitOp(client, s int, docs, incs, seen []int, call int64, class outClass, ret int64) porcupine.Operation {
	op := porcupine.Operation{ClientId: client, Input: opInput{Kind: opCommit, Key: s, Docs: docs, Incs: incs, Seen: seen},
		Call: call, Output: opOutput{Class: class, Env: "e" + class.String()}, Return: ret}
	if class == outUnknown {
		op.Output, op.Return = opOutput{}, math.MaxInt64
	}
	return op
}

func readDoc(client, d int, call int64, value int, ret int64) porcupine.Operation {
	op := readOp(client, call, value, ret)
	op.Input = opInput{Kind: opRead, Docs: []int{d}}
	return op
}

// TestModels_ExpiredKeysNeverApply: an expired answer is definite — its
// batch never applied — and a generation sent only while its key's
// tombstone lasted (spent) has no effect at all, whatever else its
// attempts answered: a read that sees one is refused. An expired answer
// is not an answer the key replays (the keys model passes over it).
func TestModels_ExpiredKeysNeverApply(t *testing.T) {
	expired := func(client, key, gen int, call, ret int64) porcupine.Operation {
		op := batchOp(client, key, call, outExpired, ret)
		op.Input = opInput{Kind: opBatch, Key: key, Gen: gen, Docs: []int{0}}
		op.Output = opOutput{Class: outExpired}
		return op
	}
	unknown := func(client, key, gen int, call int64) porcupine.Operation {
		op := batchOp(client, key, call, outUnknown, 0)
		op.Input = opInput{Kind: opBatch, Key: key, Gen: gen, Docs: []int{0}}
		return op
	}
	spent := observations{spent: map[keyGen]bool{{1, 1}: true}}
	cases := []struct {
		name string
		h    []porcupine.Operation
		obs  observations
		ok   bool
	}{
		{"refused, nothing seen", []porcupine.Operation{
			batchOp(0, 1, 1, outCommitted, 2), expired(2, 1, 1, 3, 4), readOp(1, 5, 1, 6)}, observations{}, true},
		{"refused, yet applied", []porcupine.Operation{
			batchOp(0, 1, 1, outCommitted, 2), unknown(3, 1, 1, 3), expired(2, 1, 1, 4, 5), readOp(1, 6, 2, 7)}, observations{}, false},
		{"unknown and not spent: may apply", []porcupine.Operation{
			batchOp(0, 1, 1, outCommitted, 2), unknown(3, 1, 1, 3), readOp(1, 6, 2, 7)}, observations{}, true},
		{"spent, an unknown attempt applied", []porcupine.Operation{
			batchOp(0, 1, 1, outCommitted, 2), unknown(3, 1, 1, 3), readOp(1, 6, 2, 7)}, spent, false},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperations(docModel(), effectHistory(c.h, c.obs)); got != c.ok {
			t.Errorf("%s: linearizable=%v, want %v", c.name, got, c.ok)
		}
	}
	first := []porcupine.Operation{batchOp(0, 1, 1, outCommitted, 2), expired(1, 1, 0, 3, 4)}
	if !porcupine.CheckOperations(keyModel(), first) {
		t.Error("keys model: an expired answer taken for a different terminal answer")
	}
}

// TestModels_SessionCommitsKeepVerdicts: a session's commit applies what
// it staged once, where every counter it saw still holds the value seen,
// and nothing of it before its commit was asked for; the models accept the
// correct histories and refuse a lost update (a commit applied over a
// write made since the session saw the counter), staged increments visible
// before the commit, a conflict-aborted commit that applied, a session
// never committed whose increments show, a double apply across retries,
// half a commit (one counter of two), and a retry answered differently.
func TestModels_SessionCommitsKeepVerdicts(t *testing.T) {
	one, seen0 := []int{0}, []int{0}
	cases := []struct {
		name string
		h    []porcupine.Operation
		ok   bool
	}{
		{"committed over what it saw", []porcupine.Operation{
			readOp(1, 1, 0, 2), commitOp(0, 0, one, []int{3}, seen0, 3, outCommitted, 4), readOp(1, 5, 3, 6)}, true},
		{"a batch linearized after it", []porcupine.Operation{
			batchOp(2, 1, 1, outCommitted, 10), commitOp(0, 0, one, []int{3}, seen0, 2, outCommitted, 4), readOp(1, 11, 4, 12)}, true},
		{"unknown, applied after a retry's call", []porcupine.Operation{
			commitOp(0, 0, one, []int{2}, seen0, 1, outUnknown, 2), readOp(1, 3, 0, 4),
			commitOp(2, 0, one, []int{2}, seen0, 5, outCommitted, 6), readOp(1, 7, 2, 8)}, true},
		{"lost update", []porcupine.Operation{
			batchOp(2, 1, 1, outCommitted, 2), commitOp(0, 0, one, []int{3}, seen0, 3, outCommitted, 4), readOp(1, 5, 4, 6)}, false},
		{"staged increments visible before the commit", []porcupine.Operation{
			readOp(1, 1, 3, 2), commitOp(0, 0, one, []int{3}, []int{-1}, 3, outCommitted, 4)}, false},
		{"a session never committed shows", []porcupine.Operation{
			batchOp(2, 1, 1, outCommitted, 2), readOp(1, 3, 4, 4)}, false},
		{"conflict-aborted commit applied", []porcupine.Operation{
			commitOp(0, 0, one, []int{3}, seen0, 1, outUnknown, 2), commitOp(2, 0, one, []int{3}, seen0, 3, outNotApplied, 4), readOp(1, 5, 3, 6)}, false},
		{"applied twice across retries", []porcupine.Operation{
			commitOp(0, 0, one, []int{3}, []int{-1}, 1, outUnknown, 2), commitOp(2, 0, one, []int{3}, []int{-1}, 3, outCommitted, 4), readOp(1, 5, 6, 6)}, false},
		{"half a commit", []porcupine.Operation{
			commitOp(0, 0, []int{0, 1}, []int{1, 2}, []int{-1, -1}, 1, outCommitted, 2), readDoc(1, 0, 3, 1, 4), readDoc(1, 1, 5, 0, 6)}, false},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperations(docModel(), effectHistory(c.h, observations{})); got != c.ok {
			t.Errorf("%s: linearizable=%v, want %v", c.name, got, c.ok)
		}
	}
	differ := []porcupine.Operation{commitOp(0, 0, one, []int{1}, seen0, 1, outCommitted, 2), commitOp(1, 0, one, []int{1}, seen0, 3, outNotApplied, 4)}
	if porcupine.CheckOperations(keyModel(), differ) {
		t.Error("keys model: two terminal answers to one session's commit accepted")
	}
}
