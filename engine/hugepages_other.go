//go:build !linux

package engine

// adviseHuge is advice Linux alone takes (hugepages_linux.go).
func adviseHuge([]byte) {}
