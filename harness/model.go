package harness

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"

	"github.com/anishathalye/porcupine"
)

// genMax bounds a key's generations (cleanups) in one scenario, and keysMax
// the keys, so that a (key, generation) pair fits a bit of a uint64;
// sessionsMax bounds the sessions begun in one scenario, so that a session
// fits a bit of another.
const (
	genMax      = 4
	keysMax     = 16
	sessionsMax = 64
)

func kgBit(key, gen int) uint64 { return 1 << uint(key*genMax+gen) }

// docState is model (b)'s state for one counter document: its value, which
// (key, generation) batches and which sessions' commits have been applied
// to it.
type docState struct {
	value   int
	applied uint64
	commits uint64
}

// docModel checks document reads against keyed batches and session
// commits, partitioned by document: every batch of a (key, generation),
// and every session's commit, changes the counter at most once — a batch
// by one, a commit by what the session staged on it — a committed answer
// means it did (at or before its return), a not-applied or an expired
// answer means it never did, an unknown answer means it may have, at any
// time after its call; a commit applies only where the counter still holds the value the
// session saw (its commit is conditioned on the version seen); and every
// read sees exactly the effects linearized before it — nothing a session
// staged before its commit applied.
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
			if in.Kind == opCommit {
				return commitStep(s, in, out)
			}
			bit := kgBit(in.Key, in.Gen)
			done := s.applied&bit != 0
			applied := docState{value: s.value + 1, applied: s.applied | bit, commits: s.commits}
			switch out.Class {
			case outCommitted:
				if done {
					return []interface{}{s}
				}
				return []interface{}{applied}
			case outNotApplied, outExpired:
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
			return uint64(s.value)*0x9e3779b97f4a7c15 ^ s.applied ^ (s.commits * 0xbf58476d1ce4e5b9)
		},
		DescribeOperation: describeOp,
		DescribeState: func(state interface{}) string {
			s := state.(docState)
			return fmt.Sprintf("n=%d applied=%#x commits=%#x", s.value, s.applied, s.commits)
		},
	}
	return nd.ToModel()
}

// commitStep is docModel's step for a session's commit on the one counter
// of its partition (partitionByDoc narrows Docs, Incs and Seen to it).
func commitStep(s docState, in opInput, out opOutput) []interface{} {
	bit := uint64(1) << uint(in.Key)
	done := s.commits&bit != 0
	// A counter the session saw at some value can take the commit only
	// while it still holds that value.
	fits := in.Seen[0] < 0 || s.value == in.Seen[0]
	applied := docState{value: s.value + in.Incs[0], applied: s.applied, commits: s.commits | bit}
	switch {
	case done && out.Class == outNotApplied:
		return nil
	case done:
		return []interface{}{s}
	case out.Class == outCommitted && fits:
		return []interface{}{applied}
	case out.Class == outCommitted:
		return nil
	case out.Class == outUnknown && fits:
		return []interface{}{s, applied}
	}
	return []interface{}{s}
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

// partitionByDoc splits the history by counter; a commit that touches
// several counters is one operation in each of their partitions, narrowed
// to that counter.
func partitionByDoc(h []porcupine.Operation) [][]porcupine.Operation {
	by := map[int][]porcupine.Operation{}
	for _, op := range h {
		in := op.Input.(opInput)
		for i, d := range in.Docs {
			if in.Kind == opCommit {
				one := op
				one.Input = opInput{Kind: opCommit, Key: in.Key, Docs: []int{d}, Incs: []int{in.Incs[i]}, Seen: []int{in.Seen[i]}}
				by[d] = append(by[d], one)
				continue
			}
			by[d] = append(by[d], op)
		}
	}
	return collect(by)
}

// partitionByKey splits the answers by (key, generation), and a session's
// commits into one partition per session.
func partitionByKey(h []porcupine.Operation) [][]porcupine.Operation {
	by := map[int][]porcupine.Operation{}
	for _, op := range h {
		switch in := op.Input.(opInput); in.Kind {
		case opBatch:
			kg := in.Key*genMax + in.Gen
			by[kg] = append(by[kg], op)
		case opCommit:
			by[keysMax*genMax+in.Key] = append(by[keysMax*genMax+in.Key], op)
		}
	}
	return collect(by)
}

func collect(by map[int][]porcupine.Operation) [][]porcupine.Operation {
	out := make([][]porcupine.Operation, 0, len(by))
	for _, i := range slices.SortedFunc(maps.Keys(by), cmp.Compare[int]) {
		out = append(out, by[i])
	}
	return out
}

func describeOp(input, output interface{}) string {
	in, out := input.(opInput), output.(opOutput)
	switch in.Kind {
	case opRead:
		return fmt.Sprintf("read(c%d) -> %d", in.Docs[0], out.Value)
	case opCommit:
		return fmt.Sprintf("commit(s%d counters %v inc %v seen %v) -> %s %s", in.Key, in.Docs, in.Incs, in.Seen, out.Class, out.Env)
	}
	resend := ""
	if in.Resend {
		resend = " resend"
	}
	return fmt.Sprintf("batch(k%d.%d%s inc %v) -> %s %s", in.Key, in.Gen, resend, in.Docs, out.Class, out.Env)
}
