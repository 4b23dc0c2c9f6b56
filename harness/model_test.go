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
