//go:build nofailpoint

package fault

// Compiled reports whether failpoints are compiled in (false under -tags nofailpoint).
const Compiled = false

// Eval always reports false: failpoints are compiled away, and this file
// imports nothing from pingcap/failpoint, so a nofailpoint binary does not
// link it (GO_FAILPOINTS has nothing to read it).
func Eval(string) (any, bool) { return nil, false }

// Enable is a no-op without failpoints.
func Enable(string, string) error { return nil }

// Disable is a no-op without failpoints.
func Disable(string) error { return nil }

// Hits is always zero without failpoints.
func Hits(string) int64 { return 0 }
