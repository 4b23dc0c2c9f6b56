//go:build nofailpoint

package fault

import "github.com/pingcap/failpoint"

// Compiled reports whether failpoints are compiled in (false under -tags nofailpoint).
const Compiled = false

// Eval always reports false: failpoints are compiled away.
func Eval(string) (failpoint.Value, bool) { return nil, false }

// Enable is a no-op without failpoints.
func Enable(string, string) error { return nil }

// Disable is a no-op without failpoints.
func Disable(string) error { return nil }

// Hits is always zero without failpoints.
func Hits(string) int64 { return 0 }
