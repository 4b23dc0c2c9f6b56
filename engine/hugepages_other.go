//go:build !linux

package engine

// adviseHuge is advice Linux alone takes (hugepages_linux.go).
func adviseHuge([]byte) {}

// hugeBuf is an empty slice with room for n bytes (hugepages_linux.go).
func hugeBuf(n int) []byte { return make([]byte, 0, n) }
