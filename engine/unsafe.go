package engine

import "unsafe"

// unsafeString views engine-owned, never-mutated key bytes as a string for
// map lookups without a copy.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// memOf views the memory behind s, to its capacity, as bytes: for advice
// about the pages under it (hugepages_linux.go), never to read or write.
func memOf[T any](s []T) []byte {
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), cap(s)*int(unsafe.Sizeof(zero)))
}
