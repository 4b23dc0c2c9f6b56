package engine

import "unsafe"

// unsafeString views engine-owned, never-mutated key bytes as a string for
// map lookups without a copy.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
