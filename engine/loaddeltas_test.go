package engine

import (
	"testing"
	"unsafe"
)

// TestDeltaItems_GivesEachDeltaItsOwnStretchOfOneArray: each delta's
// stretch is empty with room for exactly its listed count, the stretches
// do not overlap, and a count past loadPreallocMax (a damaged header,
// caught later by the CRC) gets nil, for the delta to allocate its own.
func TestDeltaItems_GivesEachDeltaItsOwnStretchOfOneArray(t *testing.T) {
	ds := []deltaMeta{{count: 3}, {count: 0}, {count: loadPreallocMax + 1}, {count: 70_000}, {count: 1}}
	got := deltaItems(ds)
	if len(got) != len(ds) {
		t.Fatalf("%d stretches for %d deltas", len(got), len(ds))
	}
	if got[2] != nil {
		t.Fatalf("a count past the bound got a stretch of %d", cap(got[2]))
	}
	var ends []uintptr
	for i, s := range got {
		if i == 2 {
			continue
		}
		if len(s) != 0 || uint64(cap(s)) != ds[i].count {
			t.Fatalf("delta %d: len %d cap %d, want 0 and %d", i, len(s), cap(s), ds[i].count)
		}
		if cap(s) == 0 {
			continue
		}
		start := uintptr(unsafe.Pointer(unsafe.SliceData(s[:1])))
		for j := 0; j+1 < len(ends); j += 2 {
			if start < ends[j+1] && ends[j] < start+uintptr(cap(s))*unsafe.Sizeof(s[:1][0]) {
				t.Fatalf("delta %d's stretch overlaps an earlier one", i)
			}
		}
		ends = append(ends, start, start+uintptr(cap(s))*unsafe.Sizeof(s[:1][0]))
	}
}
