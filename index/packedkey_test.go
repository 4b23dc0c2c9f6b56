package index

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// randKey is a key of the shapes the store holds and their neighbours:
// receipts' rcpt/v1/<32 hex>, bare hex, uppercase and short hex tails,
// non-hex tails, prefixes of one another, and bytes around the hex digits.
func randKey(r *rand.Rand) []byte {
	const alphabet = "0123456789abcdefABCDEF/:`g\x00\xff"
	hex := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = "0123456789abcdef"[r.IntN(16)]
			if r.IntN(4) == 0 {
				b[i] = "09af"[r.IntN(4)] // runs of equal digits: long shared prefixes
			}
		}
		return b
	}
	prefixes := []string{"", "rcpt/v1/", "rcpt/v1", "rcpt/v1/0", "r", "rcpt/v10/", "a", "ab"}
	pre := []byte(prefixes[r.IntN(len(prefixes))])
	switch r.IntN(6) {
	case 0, 1: // packable
		return append(pre, hex(32)...)
	case 2: // packable, with more hex before the tail
		return append(append(pre, hex(1+r.IntN(8))...), hex(32)...)
	case 3: // short hex tail
		return append(pre, hex(r.IntN(32))...)
	case 4: // a packable key with one byte changed: uppercase, non-hex
		k := append(pre, hex(32)...)
		k[len(k)-1-r.IntN(32)] = alphabet[r.IntN(len(alphabet))]
		return k
	default: // a packable key with a suffix: a key it is a prefix of
		k := append(pre, hex(32)...)
		return append(k, alphabet[r.IntN(len(alphabet))])
	}
}

// item makes the item a checkpoint's image would: packed if it can be.
func item(key []byte, ver uint64) KV {
	buf, packed := AppendStoredKey(nil, key)
	klen := len(buf)
	buf = binary.AppendUvarint(append(buf, "val"...), ver)
	kv := PackedKV(buf, klen, 3)
	if packed {
		kv = kv.WithPackedKey()
	}
	return kv
}

func sign(c int) int { return max(-1, min(1, c)) }

// TestCompareKey_AgreesWithRawOrder: for random pairs of keys, every mix of
// packed and raw forms compares as bytes.Compare compares the raw keys, and
// every form gives back its raw bytes.
func TestCompareKey_AgreesWithRawOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 4))
	for range 200_000 {
		a, b := randKey(r), randKey(r)
		if r.IntN(8) == 0 {
			b = bytes.Clone(a) // equal keys
		}
		want := bytes.Compare(a, b)
		forms := func(k []byte) []KV { return []KV{Probe(k), item(k, 1)} }
		for _, x := range forms(a) {
			for _, y := range forms(b) {
				if got := x.CompareKey(y); sign(got) != want {
					t.Fatalf("CompareKey(%q packed %v, %q packed %v) = %d, want %d", a, x.KeyPacked(), b, y.KeyPacked(), got, want)
				}
			}
		}
		if it := item(a, 7); !bytes.Equal(it.Key(), a) || it.KeyLen() != len(a) || !bytes.Equal(it.AppendKey([]byte("x")), append([]byte("x"), a...)) {
			t.Fatalf("item of %q gives back %q (%d bytes)", a, it.Key(), it.KeyLen())
		}
	}
}

// TestPackedKey_Forms: which keys pack, and what a packed item gives back.
func TestPackedKey_Forms(t *testing.T) {
	hex := "0123456789abcdef0123456789abcdef"
	for _, c := range []struct {
		key    string
		packed bool
	}{
		{"rcpt/v1/" + hex, true}, {hex, true}, {"x" + hex, true},
		{hex[:31], false}, {"rcpt/v1/" + hex[:31], false},
		{"rcpt/v1/0123456789ABCDEF0123456789abcdef", false}, {"rcpt/v1/" + hex + "/", false},
		{"rcpt/v1/" + hex[:31] + "g", false},
	} {
		stored, packed := AppendStoredKey(nil, []byte(c.key))
		if packed != c.packed || Packable([]byte(c.key)) != c.packed {
			t.Errorf("%q: packed %v, want %v", c.key, packed, c.packed)
		}
		if want := len(c.key) - 16; packed && len(stored) != want {
			t.Errorf("%q: %d stored bytes, want %d", c.key, len(stored), want)
		}
		it := item([]byte(c.key), 1<<40)
		var dst [64]byte
		n := it.CopyKey(dst[:10])
		if string(it.Key()) != c.key || string(it.Value()) != "val" || it.Version() != 1<<40 ||
			string(dst[:n]) != c.key[:min(10, len(c.key))] || it.KeyPacked() != c.packed {
			t.Errorf("%q: item gives %q %q@%d, copies %q", c.key, it.Key(), it.Value(), it.Version(), dst[:n])
		}
		again, p2 := it.AppendStoredKey(nil)
		if !bytes.Equal(again, stored) || p2 != packed {
			t.Errorf("%q: the item's stored key %x (%v), the key's %x (%v)", c.key, again, p2, stored, packed)
		}
	}
}

// TestKeySpace_MixedForms: a key space of packed and raw items finds each
// by a raw probe, replaces a packed item by a raw one of the same key, and
// ascends in raw order.
func TestKeySpace_MixedForms(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	ks := NewKeySpace()
	keys := map[string]bool{}
	for range 5000 {
		k := randKey(r)
		kv := item(k, 1)
		if r.IntN(2) == 0 {
			kv = PackedKV(AppendKV(nil, k, []byte("val"), 1), len(k), 3)
		}
		ks.Put(kv)
		keys[string(k)] = true
	}
	if ks.Len() != len(keys) {
		t.Fatalf("%d items for %d keys", ks.Len(), len(keys))
	}
	var got []string
	ks.AscendAll(func(it KV) bool { got = append(got, string(it.Key())); return true })
	if !slices.IsSorted(got) {
		t.Error("the key space does not ascend in raw order")
	}
	for k := range keys {
		raw := PackedKV(AppendKV(nil, []byte(k), []byte("new"), 2), len(k), 3)
		if old, ok := ks.Put(raw); !ok || string(old.Key()) != k {
			t.Fatalf("Put of raw %q replaced %v %q", k, ok, old.Key())
		}
		if it, ok := ks.Get(Probe([]byte(k))); !ok || it.Version() != 2 {
			t.Fatalf("Get(%q) = %v, %d", k, ok, it.Version())
		}
	}
}

// TestCompareKey_DoesNotAllocate: the tree's comparison of a raw probe
// with packed items allocates nothing.
func TestCompareKey_DoesNotAllocate(t *testing.T) {
	a := item([]byte("rcpt/v1/0123456789abcdef0123456789abcdef"), 1)
	b := Probe([]byte("rcpt/v1/0123456789abcdef0123456789abcdee"))
	c := item([]byte("x0123456789abcdef0123456789abcdef"), 1)
	if n := testing.AllocsPerRun(100, func() { _ = a.CompareKey(b) + b.CompareKey(a) + a.CompareKey(c) }); n != 0 {
		t.Errorf("%v allocations per comparison", n)
	}
}
