//go:build !nofailpoint

// Package fault is the failpoint seam of the project (docs/design.md §9).
//
// Production code calls Eval or Inject at every durable step instead of
// pingcap/failpoint's marker functions: the markers are only live after a
// source rewrite, which a plain `go test ./...` never runs. When nothing is
// armed, Eval is one atomic load. Failpoints are armed by Enable in tests and by
// the GO_FAILPOINTS environment variable in processes (parsed by
// pingcap/failpoint itself). Building with -tags nofailpoint compiles the seam
// away and links no pingcap/failpoint code at all: that is the release build
// (`make build`), in which GO_FAILPOINTS does nothing. idemd checks the
// names GO_FAILPOINTS arms against the catalog at start (CheckEnv).
//
// Planted bugs (planted.go) are not failpoints: they exist only in a build
// with -tags idem_selftest, for the harness's checker self-test.
package fault

import (
	"os"
	"sync"
	"sync/atomic"

	"github.com/pingcap/failpoint"
)

// Compiled reports whether failpoints are compiled in (false under -tags nofailpoint).
const Compiled = true

// armed counts enabled failpoints; zero keeps Eval to a single atomic load.
// enabled remembers which names are armed so that disabling twice (or a
// name never enabled) cannot drive the count below the truth.
var (
	armed   atomic.Int64
	enabled sync.Map // name -> struct{}
)

var hits sync.Map // name -> *atomic.Int64

func init() {
	if os.Getenv("GO_FAILPOINTS") != "" {
		// pingcap/failpoint enabled them in its own init; we only need to look.
		armed.Add(1)
	}
}

// Eval reports whether the named failpoint is enabled and, if so, the value
// its terms produced. The name must be listed in the catalog. The value is a
// plain any (not failpoint.Value) so that the seam's signature, and the
// nofailpoint build, do not depend on pingcap/failpoint.
func Eval(name string) (any, bool) {
	if armed.Load() == 0 {
		return nil, false
	}
	v, err := failpoint.Eval(name)
	if err != nil {
		return nil, false
	}
	counter(name).Add(1)
	// `pause`, `sleep` and `off` yield no value: the point was reached (and
	// counted) but nothing is injected, so the caller carries on.
	return v, v != nil
}

// Enable arms the named failpoint with pingcap/failpoint terms, for example
// `return("eio")`, `1*return("crash")` or `panic`.
func Enable(name, terms string) error {
	if err := failpoint.Enable(name, terms); err != nil {
		return err
	}
	if _, already := enabled.LoadOrStore(name, struct{}{}); !already {
		armed.Add(1)
	}
	return nil
}

// Disable disarms the named failpoint.
func Disable(name string) error {
	err := failpoint.Disable(name)
	if _, was := enabled.LoadAndDelete(name); was {
		armed.Add(-1)
	}
	return err
}

// Hits returns how many times the named failpoint fired in this process.
func Hits(name string) int64 { return counter(name).Load() }

func counter(name string) *atomic.Int64 {
	if c, ok := hits.Load(name); ok {
		return c.(*atomic.Int64)
	}
	c, _ := hits.LoadOrStore(name, new(atomic.Int64))
	return c.(*atomic.Int64)
}
