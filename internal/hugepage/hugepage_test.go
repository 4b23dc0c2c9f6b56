package hugepage

import (
	"testing"
	"unsafe"
)

type item struct{ a, b, c, d uint64 }

// TestMake_PlacesLargeBuffersOnAHugePageBoundary: a buffer of two huge
// pages or more starts on a boundary, has room for what was asked, and is
// empty; a smaller one is an ordinary slice of that room; either can be
// written to its capacity.
func TestMake_PlacesLargeBuffersOnAHugePageBoundary(t *testing.T) {
	for _, n := range []int{0, 1, 2*Size/32 - 1, 2 * Size / 32, 3*Size/32 + 7, 5 * Size / 32} {
		s := Make[item](n)
		if len(s) != 0 || cap(s) < n {
			t.Fatalf("Make(%d): len %d cap %d", n, len(s), cap(s))
		}
		p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
		if aligned := p%Size == 0; n*32 >= 2*Size && !aligned {
			t.Fatalf("Make(%d) of %d-byte items starts at %#x, not on a %d-byte boundary", n, 32, p, Size)
		}
		s = s[:cap(s)]
		for i := range s {
			s[i] = item{a: uint64(i)}
		}
		for i := range s {
			if s[i].a != uint64(i) {
				t.Fatalf("Make(%d): item %d reads %d", n, i, s[i].a)
			}
		}
	}
	if b := Make[byte](3*Size + 1); uintptr(unsafe.Pointer(unsafe.SliceData(b)))%Size != 0 || cap(b) < 3*Size+1 {
		t.Fatalf("Make[byte]: cap %d", cap(b))
	}
}
