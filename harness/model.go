package harness

import (
	"fmt"
	"hash/fnv"

	"github.com/anishathalye/porcupine"
)

// genMax bounds a key's generations (cleanups) in one scenario, and keysMax
// the keys, so that a (key, generation) pair fits a bit of a uint64.
const (
	genMax  = 4
	keysMax = 16
)

func kgBit(key, gen int) uint64 { return 1 << uint(key*genMax+gen) }

// docState is model (b)'s state for one counter document: its value and
// which (key, generation) batches have been applied to it.
type docState struct {
	value   int
	applied uint64
}

// docModel checks document reads against keyed batches, partitioned by
// document: every batch of a (key, generation) increments the counter at
// most once, a committed answer means it did (at or before its return), a
// not-applied answer means it never did, an unknown answer means it may
// have, at any time after its call — and every read sees exactly the
// batches linearized before it.
func docModel() porcupine.Model {
	nd := porcupine.NondeterministicModel{
		Partition: partitionByDoc,
		Init:      func() []interface{} { return []interface{}{docState{}} },
		Step: func(state, input, output interface{}) []interface{} {
			s, in, out := state.(docState), input.(opInput), output.(opOutput)
			if in.Kind == opRead {
				if out.Value == s.value {
					return []interface{}{s}
				}
				return nil
			}
			bit := kgBit(in.Key, in.Gen)
			done := s.applied&bit != 0
			applied := docState{value: s.value + 1, applied: s.applied | bit}
			switch out.Class {
			case outCommitted:
				if done {
					return []interface{}{s}
				}
				return []interface{}{applied}
			case outNotApplied:
				if done {
					return nil
				}
				return []interface{}{s}
			}
			if done {
				return []interface{}{s}
			}
			return []interface{}{s, applied}
		},
		Hash: func(state interface{}) uint64 {
			s := state.(docState)
			return uint64(s.value)*0x9e3779b97f4a7c15 ^ s.applied
		},
		DescribeOperation: describeOp,
		DescribeState: func(state interface{}) string {
			s := state.(docState)
			return fmt.Sprintf("n=%d applied=%#x", s.value, s.applied)
		},
	}
	return nd.ToModel()
}

// keyModel checks, per (key, generation), that every terminal answer equals
// the first one.
func keyModel() porcupine.Model {
	return porcupine.Model{
		Partition: partitionByKey,
		Init:      func() interface{} { return "" },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			first, out := state.(string), output.(opOutput)
			if out.Class == outUnknown || out.Env == "" {
				return true, first // not a terminal answer (or one the harness inferred)
			}
			if first == "" {
				return true, out.Env
			}
			return out.Env == first, first
		},
		Hash: func(state interface{}) uint64 {
			h := fnv.New64a()
			h.Write([]byte(state.(string)))
			return h.Sum64()
		},
		DescribeOperation: describeOp,
		DescribeState:     func(state interface{}) string { return "first=" + state.(string) },
	}
}

func partitionByDoc(h []porcupine.Operation) [][]porcupine.Operation {
	by := map[int][]porcupine.Operation{}
	for _, op := range h {
		for _, d := range op.Input.(opInput).Docs {
			by[d] = append(by[d], op)
		}
	}
	return collect(by)
}

func partitionByKey(h []porcupine.Operation) [][]porcupine.Operation {
	by := map[int][]porcupine.Operation{}
	for _, op := range h {
		if in := op.Input.(opInput); in.Kind == opBatch {
			kg := in.Key*genMax + in.Gen
			by[kg] = append(by[kg], op)
		}
	}
	return collect(by)
}

func collect(by map[int][]porcupine.Operation) [][]porcupine.Operation {
	out := make([][]porcupine.Operation, 0, len(by))
	for i := 0; i < keysMax*genMax+keysMax; i++ {
		if ops, ok := by[i]; ok {
			out = append(out, ops)
		}
	}
	return out
}

func describeOp(input, output interface{}) string {
	in, out := input.(opInput), output.(opOutput)
	if in.Kind == opRead {
		return fmt.Sprintf("read(c%d) -> %d", in.Docs[0], out.Value)
	}
	return fmt.Sprintf("batch(k%d.%d inc %v) -> %s %s", in.Key, in.Gen, in.Docs, out.Class, out.Env)
}
