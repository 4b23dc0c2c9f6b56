// Package hugepage backs large, fresh buffers with transparent huge pages.
//
// The first touch of fresh memory is a page fault per 4 KiB, and on a
// virtual machine that hands free memory back to its host each fault may
// cost the host's work too: 0.5–0.7 ms a MB was measured on the bench's
// machine, against 0.10–0.14 ms a MB for the same memory in huge pages.
// An open touches a hundred megabytes and more of fresh memory — the
// replay's arena and batches, the segments it reads, the load's arrays —
// so those faults were a large and, as the host's memory came and went,
// an unsteady share of its time.
//
// Go asks for no huge pages itself, and a kernel whose transparent huge
// pages are "madvise" (a common default) gives none unasked. Only whole
// huge pages inside a buffer can be backed by one: an allocation of 4 MiB
// at an arbitrary address holds one, and its edges — up to 2 MiB — fault
// page by page. Make places a buffer on a huge-page boundary for that
// reason; Advise takes a buffer as it lies.
package hugepage

import "unsafe"

// Size is a transparent huge page on amd64 and arm64 with 4 KiB base
// pages.
const Size = 2 << 20

// Make returns an empty slice with room for exactly n Ts (rounded up to
// whole huge pages), fresh and advised, whose memory begins on a huge-page
// boundary. It allocates up to Size more than it hands out: address space,
// never touched, so never resident — but counted in the Go heap, so Make
// is for buffers an open uses and drops, or few and large. Below two huge
// pages, or where T's size does not divide the distance to the boundary,
// it is a plain make.
func Make[T any](n int) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if size == 0 || n*size < 2*Size {
		return make([]T, 0, n)
	}
	want := ((n*size + Size - 1) &^ (Size - 1)) / size
	s := make([]T, 0, want+Size/size)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	gap := int((p+Size-1)&^(Size-1) - p)
	if gap%size != 0 {
		Advise(bytesOf(s))
		return s
	}
	s = s[gap/size : gap/size : gap/size+want]
	Advise(bytesOf(s))
	return s
}

// AdviseSlice is Advise over the memory behind s, to its capacity: for a
// buffer kept for long, which Make's slack would make larger in the heap.
func AdviseSlice[T any](s []T) { Advise(bytesOf(s)) }

// bytesOf views the memory behind s, to its capacity, as bytes: for
// advice about the pages under it, never to read or write.
func bytesOf[T any](s []T) []byte {
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), cap(s)*int(unsafe.Sizeof(zero)))
}
