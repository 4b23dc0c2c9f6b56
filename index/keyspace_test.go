package index

import (
	"math"
	"testing"
	"unsafe"
)

// TestKV_PartsRoundTrip: an item gives back its key, value and version, at
// every varint width of the version and with an empty value, and an
// indirect item its pointer, from bytes laid out as a checkpoint's record.
func TestKV_PartsRoundTrip(t *testing.T) {
	for _, ver := range []uint64{1, 127, 128, 1 << 20, 1<<35 + 3, math.MaxUint64} {
		for _, val := range []string{"", "v", "a value of some length"} {
			buf := AppendKV(nil, []byte("rcpt/v1/k"), []byte(val), ver)
			// The allocation ends with the varint: Version must stop there.
			buf = buf[:len(buf):len(buf)]
			for _, it := range []KV{PackedKV(buf, 9, len(val)), IndirectKV(buf, 9, len(val))} {
				if string(it.Key()) != "rcpt/v1/k" || string(it.Value()) != val || it.Version() != ver {
					t.Errorf("item of %q@%d = %q %q@%d", val, ver, it.Key(), it.Value(), it.Version())
				}
			}
			if PackedKV(buf, 9, len(val)).Indirect() || !IndirectKV(buf, 9, len(val)).Indirect() {
				t.Errorf("Indirect does not say how the item was made (%q@%d)", val, ver)
			}
		}
	}
}

// TestKV_Is16Bytes: the item's size is what RAM per retained key counts.
func TestKV_Is16Bytes(t *testing.T) {
	if n := unsafe.Sizeof(KV{}); n != 16 {
		t.Errorf("index.KV is %d bytes, want 16", n)
	}
}
