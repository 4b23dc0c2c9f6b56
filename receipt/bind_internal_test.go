package receipt

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/idemdb/idem/store"
)

// TestBind_IsTheDesignsHash: Bind is hex(SHA-256(len‖principal ‖ len‖table
// ‖ len‖key))[:32], computed the plain way, for inputs that fit its stack
// buffer and inputs that do not. A change here would rebind every stored
// receipt to a new transaction ID.
func TestBind_IsTheDesignsHash(t *testing.T) {
	plain := func(principal, tbl, key string) string {
		h := sha256.New()
		for _, s := range []string{principal, tbl, key} {
			var l [4]byte
			binary.BigEndian.PutUint32(l[:], uint32(len(s)))
			h.Write(l[:])
			h.Write([]byte(s))
		}
		return hex.EncodeToString(h.Sum(nil))[:32]
	}
	rng := rand.New(rand.NewPCG(3, 12))
	word := func(max int) string {
		b := make([]byte, rng.IntN(max+1))
		for i := range b {
			b[i] = byte(0x21 + rng.IntN(94))
		}
		return string(b)
	}
	cases := [][3]string{{"", "", ""}, {"alice", "t", "k1"}, {strings.Repeat("p", 400), "t", strings.Repeat("k", 255)}}
	for range 500 {
		cases = append(cases, [3]string{word(300), word(64), word(KeyBytesMax)})
	}
	for _, c := range cases {
		if got, want := Bind(c[0], c[1], c[2]), plain(c[0], c[1], c[2]); got != want {
			t.Fatalf("Bind(%q, %q, %q) = %s, want %s", c[0], c[1], c[2], got, want)
		}
	}
}

// TestExpiryKey_IsZeroPaddedDeadlineAndID: the retention entry's key sorts
// by deadline because the deadline is 20 digits, zero-padded, as fmt's
// %020d writes it.
func TestExpiryKey_IsZeroPaddedDeadlineAndID(t *testing.T) {
	for _, ms := range []int64{0, 1, 9, 10, 1_764_000_000_000, math.MaxInt64, -5} {
		want := store.NSExpiry.Key(fmt.Sprintf("%020d", ms), "abc")
		if got := expiryKey(ms, "abc"); string(got) != string(want) || cap(got) != len(got) && ms >= 0 {
			t.Errorf("expiryKey(%d) = %q (cap %d), want %q", ms, got, cap(got), want)
		}
	}
}
