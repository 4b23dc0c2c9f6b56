package engine

import (
	"syscall"
	"unsafe"
)

// hugePageBytes is the size of a transparent huge page on amd64 and
// arm64 (with 4 KiB base pages).
const hugePageBytes = 2 << 20

// adviseHuge asks the kernel to back the whole huge pages inside b, not
// yet touched, with huge pages (MADV_HUGEPAGE): one fault per 2 MiB
// instead of 512. Go does not ask for them itself, and a kernel whose
// transparent huge pages are "madvise" (a common default) gives none
// unasked. Advice only: an error changes nothing.
func adviseHuge(b []byte) {
	if len(b) < 2*hugePageBytes {
		return
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	from := (p + hugePageBytes - 1) &^ (hugePageBytes - 1)
	n := (p + uintptr(len(b)) - from) &^ (hugePageBytes - 1)
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, from, n, syscall.MADV_HUGEPAGE)
}
