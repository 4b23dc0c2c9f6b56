package main

import (
	"fmt"
	"slices"
	"strings"
)

// Suite is one family of benchmark cases. Each suite lives in its own
// suite_<name>.go file and registers itself from init, so adding a suite
// (twopc, receipts, http, recovery, renewal, peer) touches no other file
// (a suite with flags of its own also adds them to main.go and Options).
type Suite struct {
	Name string
	// Rank orders the suites of a default run: lower layers first, so a
	// reader meets the numbers the later suites build on before those suites.
	Rank int
	// RunsLast puts the suite after every other selected one, because it
	// compares its results with theirs (the peer suite).
	RunsLast bool
	// Optional keeps the suite out of the quick tour and out of -suite all:
	// it runs only when -suite names it. For suites that take minutes
	// whatever -duration says (crashloop: 100 SIGKILLs of a real idemd).
	Optional bool
	// Doc is one line for -h.
	Doc string
	// Run measures the suite's cases and reports each through env.Report.
	// The physical floors are measured and reported before Run is called.
	Run func(env *Env) error
}

var registry = map[string]Suite{}

// register adds a suite; a duplicate name is a programming error.
func register(s Suite) {
	if _, dup := registry[s.Name]; dup {
		panic("bench: suite registered twice: " + s.Name)
	}
	registry[s.Name] = s
}

// allSuites returns every registered suite in default order.
func allSuites() []Suite {
	out := make([]Suite, 0, len(registry))
	for _, s := range registry {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Suite) int {
		if a.Rank != b.Rank {
			return a.Rank - b.Rank
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// defaultSuites is every suite but the optional ones, in default order:
// what the quick tour and -suite all run.
func defaultSuites() []Suite {
	var out []Suite
	for _, s := range allSuites() {
		if !s.Optional {
			out = append(out, s)
		}
	}
	return out
}

// selectSuites resolves a -suite list, keeping the order the user gave.
// An empty list or "all" selects every registered suite that is not
// Optional; an optional suite runs only when named.
func selectSuites(list string) ([]Suite, error) {
	if list == "" || list == "all" {
		return defaultSuites(), nil
	}
	var out []Suite
	seen := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" || seen[name] {
			continue
		}
		s, ok := registry[name]
		if !ok {
			return nil, fmt.Errorf("unknown suite %q (have: %s)", name, suiteNames())
		}
		seen[name] = true
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no suite selected (have: %s)", suiteNames())
	}
	// Suites that compare against the others' results of the same run (the
	// peer) go last, whatever order the user gave.
	slices.SortStableFunc(out, func(a, b Suite) int {
		if a.RunsLast != b.RunsLast {
			if a.RunsLast {
				return 1
			}
			return -1
		}
		return 0
	})
	return out, nil
}

// suiteNames lists every registered suite.
func suiteNames() string { return joinNames(allSuites(), func(Suite) bool { return true }) }

// defaultNames and optionalNames split suiteNames for -h.
func defaultNames() string  { return joinNames(allSuites(), func(s Suite) bool { return !s.Optional }) }
func optionalNames() string { return joinNames(allSuites(), func(s Suite) bool { return s.Optional }) }

func joinNames(ss []Suite, keep func(Suite) bool) string {
	var names []string
	for _, s := range ss {
		if keep(s) {
			names = append(names, s.Name)
		}
	}
	return strings.Join(names, ",")
}
