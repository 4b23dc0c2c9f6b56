package index

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestAbbrev_OrdersAsTheKeys: kvLess, which decides by abbreviations when
// they differ, orders every pair of keys as their bytes do — keys in each
// namespace, in the gaps between and around them, equal to a prefix or
// cut inside one, with suffixes short, empty, or of extreme bytes — and a
// probe orders as the item of the same key.
func TestAbbrev_OrdersAsTheKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 85))
	keys := [][]byte{[]byte("a"), []byte("zzzz"), {0}, {0xff, 0xff}}
	for _, p := range abbrevPrefixes {
		keys = append(keys, bytes.Clone(p), bytes.Clone(p[:len(p)-1]), append(bytes.Clone(p[:len(p)-1]), '0'),
			append(bytes.Clone(p[:len(p)-1]), 0xff), append(bytes.Clone(p), 0), append(bytes.Clone(p), 0xff, 0xff, 0xff, 0xff))
	}
	for range 3000 {
		var k []byte
		if rng.IntN(8) == 0 {
			k = randBytes(rng, 1+rng.IntN(12), "abcdeilmnprstvxyz/01")
		} else {
			k = bytes.Clone(abbrevPrefixes[rng.IntN(len(abbrevPrefixes))])
			k = append(k, randBytes(rng, rng.IntN(6), "\x00\x01\x7f\x80\xfe\xff0123456789abcdef/")...)
		}
		keys = append(keys, k)
	}
	items := make([]KV, len(keys))
	probes := make([]KV, len(keys))
	for i, k := range keys {
		items[i] = PackedKV(AppendKV(nil, k, []byte("value"), 1), len(k), len("value"))
		probes[i] = Probe(k)
	}
	for i := range keys {
		for j := range keys {
			want := bytes.Compare(keys[i], keys[j]) < 0
			if kvLess(items[i], items[j]) != want || kvLess(probes[i], items[j]) != want || kvLess(items[i], probes[j]) != want {
				t.Fatalf("%q < %q: kvLess disagrees with the bytes (%v); abbreviations %#x, %#x",
					keys[i], keys[j], want, items[i].abbreviation(), items[j].abbreviation())
			}
		}
		if string(items[i].Key()) != string(keys[i]) || string(items[i].Value()) != "value" || items[i].Version() != 1 {
			t.Fatalf("item of %q reads back %q %q@%d", keys[i], items[i].Key(), items[i].Value(), items[i].Version())
		}
	}
}

// TestAbbrev_DiscriminatesWithinANamespace: two receipts' keys differing
// in their first byte after the prefix are ordered without their bytes
// (the point of the abbreviation: no read of an item's key).
func TestAbbrev_DiscriminatesWithinANamespace(t *testing.T) {
	a, b := Probe([]byte("rcpt/v1/0123")), Probe([]byte("rcpt/v1/f123"))
	if a.abbreviation() >= b.abbreviation() {
		t.Errorf("abbreviations %#x, %#x do not order rcpt/v1/0… before rcpt/v1/f…", a.abbreviation(), b.abbreviation())
	}
}

// TestAbbrevPrefixes: no namespace is a prefix of another, so a key's
// namespace is the one prefix it has.
func TestAbbrevPrefixes(t *testing.T) {
	for i, p := range abbrevPrefixes {
		for j, q := range abbrevPrefixes {
			if i != j && bytes.HasPrefix(q, p) {
				t.Errorf("namespace %q is a prefix of %q", p, q)
			}
		}
	}
}

// TestProbe_LongerThanAnItem: a probe past an item's length bits orders
// against items as its whole key does.
func TestProbe_LongerThanAnItem(t *testing.T) {
	long := append([]byte("rcpt/v1/"), bytes.Repeat([]byte{'7'}, klenMask+10)...)
	for _, k := range []string{"rcpt/v1/7", "rcpt/v1/77777778", "rcpt/v1/6", "tbl/v1/x"} {
		it := PackedKV(AppendKV(nil, []byte(k), nil, 1), len(k), 0)
		if got, want := kvLess(Probe(long), it), bytes.Compare(long, []byte(k)) < 0; got != want {
			t.Errorf("long probe < %q: %v, want %v", k, got, want)
		}
	}
}

func randBytes(rng *rand.Rand, n int, alphabet string) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return b
}
