package engine_test

import (
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/engine/check"
)

// The offline checker for the internal tests that hold their dirs to it
// (export_test.go): they cannot import engine/check, which imports engine.
func init() {
	engine.CheckDir = func(dir string) (bool, []engine.CheckProblem, error) {
		rep, err := check.Dir(nil, dir, check.Options{})
		if err != nil {
			return false, nil, err
		}
		out := make([]engine.CheckProblem, 0, len(rep.Problems))
		for _, p := range rep.Problems {
			out = append(out, engine.CheckProblem{Kind: string(p.Kind), File: p.File, Detail: p.Detail})
		}
		return rep.Loaded, out, nil
	}
}
