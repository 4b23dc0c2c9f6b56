package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
)

// TestClaim_InvariantsArePaired: a claim that breaks an invariant is never
// encoded (encodeClaim panics before its batch is applied: it has no error
// to return) and, forced past encode into the store, is refused by Read
// and Resync as corruption naming its key. A well-formed claim round-trips.
func TestClaim_InvariantsArePaired(t *testing.T) {
	ctx := context.Background()
	good := Claim{Node: "n1", Incarnation: 2, Epoch: 1}
	if c, err := decodeClaim(ClaimKey("r"), encodeClaim(good)); err != nil || c != good {
		t.Fatalf("round trip %+v %v", c, err)
	}
	for name, c := range map[string]Claim{
		"no node":         {Incarnation: 1, Epoch: 1},
		"a node too long": {Node: strings.Repeat("n", NodeIDBytesMax+1), Epoch: 1},
		"epoch 0":         {Node: "n1", Incarnation: 1},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "invariant broken") {
					t.Errorf("%s: encodeClaim did not panic with a broken invariant (%v)", name, r)
				}
			}()
			encodeClaim(c)
		}()
		raw, err := cbor.Marshal(c) // forced past encodeClaim's check
		if err != nil {
			t.Fatal(err)
		}
		st := memstore.New()
		key := ClaimKey("r")
		if _, err := st.Apply(ctx, new(store.Batch).Put(key, raw)); err != nil {
			t.Fatal(err)
		}
		_, err = Read(ctx, st, "r")
		wantDamaged(t, name+": Read", err, key)
		h := Resume("r", State{Claim: good, ClaimVersion: 1, Expires: time.Unix(1, 0)})
		wantDamaged(t, name+": Resync", h.Resync(ctx, st), key)
	}
}

// TestRead_AnExpiryNotEightBytesIsCorruption: the expiry key holds 8
// bytes; anything else is that key's damage.
func TestRead_AnExpiryNotEightBytesIsCorruption(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	if _, err := st.Apply(ctx, new(store.Batch).Put(ExpiryKey("r"), []byte{1, 2, 3})); err != nil {
		t.Fatal(err)
	}
	_, err := Read(ctx, st, "r")
	wantDamaged(t, "Read", err, ExpiryKey("r"))
}

func wantDamaged(t *testing.T, what string, err error, key []byte) {
	t.Helper()
	if k, ok := store.DamagedKey(err); !errors.Is(err, store.ErrCorruption) || !ok || !bytes.Equal(k, key) ||
		!strings.Contains(err.Error(), fmt.Sprintf("%q", key)) {
		t.Errorf("%s: %v, want store.ErrCorruption naming %q", what, err, key)
	}
}
