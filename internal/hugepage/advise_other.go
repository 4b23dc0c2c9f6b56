//go:build !linux

package hugepage

// Advise is advice Linux alone takes (advise_linux.go).
func Advise([]byte) {}
