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
	// Cases are the names -case can select in this suite; a suite without
	// them runs all its cases and refuses -case.
	Cases []string
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

// selectCases resolves a -case list against the selected suites: each
// entry is case (every selected suite that has it) or suite:case. It
// returns, per suite, the cases to run; nil when list is empty (run all).
// Every entry must name a case, and every selected suite must keep at
// least one: a -case that leaves a suite with nothing to run, or names a
// suite that cannot select its cases, is an error, not a silent no-op.
func selectCases(list string, suites []Suite) (map[string]map[string]bool, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	for _, s := range suites {
		if len(s.Cases) == 0 {
			return nil, fmt.Errorf("-case: suite %s runs all its cases (-case selects cases of: %s)", s.Name,
				joinNames(allSuites(), func(s Suite) bool { return len(s.Cases) > 0 }))
		}
	}
	out := map[string]map[string]bool{}
	add := func(s Suite, c string) bool {
		if !slices.Contains(s.Cases, c) {
			return false
		}
		if out[s.Name] == nil {
			out[s.Name] = map[string]bool{}
		}
		out[s.Name][c] = true
		return true
	}
	for _, entry := range strings.Split(list, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		suite, c, qualified := strings.Cut(entry, ":")
		if !qualified {
			suite, c = "", entry
		}
		found := false
		for _, s := range suites {
			if (suite == "" || s.Name == suite) && add(s, c) {
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("-case %q: no selected suite has that case (%s)", entry, caseNames(suites))
		}
	}
	for _, s := range suites {
		if len(out[s.Name]) == 0 {
			return nil, fmt.Errorf("-case names no case of suite %s (%s)", s.Name, caseNames(suites))
		}
	}
	return out, nil
}

// caseNames lists the selectable cases of suites as suite:case.
func caseNames(suites []Suite) string {
	var names []string
	for _, s := range suites {
		for _, c := range s.Cases {
			names = append(names, s.Name+":"+c)
		}
	}
	return "have: " + strings.Join(names, ",")
}
