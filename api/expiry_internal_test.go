package api

import (
	"testing"
	"time"

	"github.com/idemdb/idem/receipt"
)

// TestKeyExpiry_CachedTextIsTheRenderedText: the text kept from the last
// answer is handed out only for the same seconds; any other promise, one
// with a member left out included, is rendered afresh.
func TestKeyExpiry_CachedTextIsTheRenderedText(t *testing.T) {
	at := func(s int64) time.Time { return time.Unix(s, 999_999_999) }
	cases := []struct {
		e    receipt.Expiry
		want string
	}{
		{receipt.Expiry{ReplayUntil: at(100), ProtectUntil: at(200)}, "replay=@100, protect=@200"},
		{receipt.Expiry{ReplayUntil: at(100), ProtectUntil: at(200)}, "replay=@100, protect=@200"},
		{receipt.Expiry{ReplayUntil: at(100), ProtectUntil: at(201)}, "replay=@100, protect=@201"},
		{receipt.Expiry{ProtectUntil: at(201)}, "protect=@201"},
		{receipt.Expiry{ReplayUntil: at(201)}, "replay=@201"},
		{receipt.Expiry{ReplayUntil: time.Unix(0, 0)}, "replay=@0"},
		{receipt.Expiry{ProtectUntil: time.Unix(0, 0)}, "protect=@0"},
		{receipt.Expiry{}, ""},
		{receipt.Expiry{ProtectUntil: time.Unix(0, 0)}, "protect=@0"},
	}
	for i, c := range cases {
		if got := keyExpiry(c.e); got != c.want {
			t.Errorf("case %d: keyExpiry(%v) = %q, want %q", i, c.e, got, c.want)
		}
	}
}

// TestKeyExpiry_SameSecondsAllocateNothing: the answers of one second
// share the text (what the cache is for).
func TestKeyExpiry_SameSecondsAllocateNothing(t *testing.T) {
	e := receipt.Expiry{ReplayUntil: time.Unix(1_700_003_600, 0), ProtectUntil: time.Unix(1_700_172_800, 0)}
	keyExpiry(e)
	if n := testing.AllocsPerRun(100, func() { keyExpiry(e) }); n != 0 {
		t.Fatalf("%v allocations per answer, want 0", n)
	}
}
