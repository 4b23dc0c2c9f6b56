package engine

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// packedTestKey is a key of one of the shapes packing tells apart:
// receipts' rcpt/v1/<32 hex> and bare hex (packed), and uppercase, short,
// non-hex and longer tails and keys that are prefixes of others (raw).
func packedTestKey(r *rand.Rand) string {
	hex := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte("0123456789abcdef"[r.IntN(16)])
		}
		return b.String()
	}
	h := hex(32)
	switch r.IntN(7) {
	case 0, 1:
		return "rcpt/v1/" + h
	case 2:
		return h
	case 3:
		return "rcpt/v1/" + strings.ToUpper(h)
	case 4:
		return "rcpt/v1/" + h[:r.IntN(32)]
	case 5:
		return "rcpt/v1/" + h + "/x"
	default:
		return "doc/" + h[:8]
	}
}

// TestPackedKeys_EveryPathGivesBackTheRawKey: a store of packable and
// unpackable keys, some values in the value log, goes through a base, deltas
// with deletions, a merge and a reopen. Its tree then holds packed items,
// and every Get, Scan (bounded by raw keys), ScanHot, snapshot and
// VerifyKeys gives back the raw keys that were put, in raw order, and a
// checkpoint over the reopened store reopens the same.
func TestPackedKeys_EveryPathGivesBackTheRawKey(t *testing.T) {
	r := rand.New(rand.NewPCG(seedFor(t), 41))
	disk := newMemDisk()
	opts := Options{CheckpointLogBytes: -1, ColdValue: testCold}
	db := disk.open(t, opts)
	want := map[string]string{}
	var keys []string
	write := func(n int) {
		for range n {
			k := packedTestKey(r)
			if len(keys) > 0 && r.IntN(3) == 0 {
				k = keys[r.IntN(len(keys))]
			}
			if _, ok := want[k]; !ok {
				keys = append(keys, k)
			}
			want[k] = fmt.Sprintf("%s=%d%s", k, r.IntN(1000), strings.Repeat("v", r.IntN(20)))
			putT(t, db, k, want[k])
			if len(keys) > 0 && r.IntN(8) == 0 {
				gone := keys[r.IntN(len(keys))]
				deleteT(t, db, gone)
				delete(want, gone)
			}
		}
	}
	write(400)
	checkpointT(t, db) // the base
	for i := 0; db.merges.merging == nil; i++ {
		if i == 20 {
			t.Fatal("no merge due after 20 deltas")
		}
		write(150)
		checkpointT(t, db)
	}
	if err := db.merges.mergeAll(); err != nil {
		t.Fatal(err)
	}
	write(100)
	checkpointT(t, db) // a delta over the merged base
	write(50)          // the log's tail
	for _, step := range []string{"reopened", "reopened after a checkpoint"} {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db = disk.open(t, opts)
		checkPackedState(t, step, db, want)
		checkpointT(t, db)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkPackedState checks every read path of db against want.
func checkPackedState(t *testing.T, step string, db *DB, want map[string]string) {
	t.Helper()
	ctx := context.Background()
	packed := 0
	db.tree.AscendAll(func(it index.KV) bool {
		if it.KeyPacked() {
			packed++
		}
		return true
	})
	if packed == 0 {
		t.Fatalf("%s: no packed item in the tree", step)
	}
	sorted := slices.Sorted(maps.Keys(want))
	for _, k := range sorted {
		it, err := db.Get(ctx, []byte(k))
		if err != nil || string(it.Key) != k || string(it.Value) != want[k] {
			t.Fatalf("%s: Get(%q) = %q %q, %v", step, k, it.Key, it.Value, err)
		}
	}
	items, err := db.Scan(ctx, nil, nil, len(want)+1)
	if err != nil {
		t.Fatal(err)
	}
	sameKeys(t, step+": Scan", items, sorted, want)
	lo, hi := sorted[len(sorted)/4], sorted[3*len(sorted)/4]
	if items, err = db.Scan(ctx, []byte(lo), []byte(hi), len(want)); err != nil {
		t.Fatal(err)
	}
	sameKeys(t, step+": Scan of a range", items, sorted[len(sorted)/4:3*len(sorted)/4], want)
	hot, cold, _, err := db.ScanHot(ctx, nil, nil, len(want)+1)
	if err != nil || len(hot)+cold != len(want) {
		t.Fatalf("%s: ScanHot: %d hot, %d cold of %d, %v", step, len(hot), cold, len(want), err)
	}
	for _, it := range hot {
		if want[string(it.Key)] != string(it.Value) {
			t.Fatalf("%s: ScanHot gave %q = %q", step, it.Key, it.Value)
		}
	}
	var snapped []store.Item
	if err := db.Snapshot().Ascend(nil, func(it store.Item) bool { snapped = append(snapped, it); return true }); err != nil {
		t.Fatal(err)
	}
	sameKeys(t, step+": Snapshot", snapped, sorted, want)
	var verified []string
	db.VerifyKeys(func(k StoredKey) bool {
		if k.ValueErr != nil {
			t.Errorf("%s: VerifyKeys: %q: %v", step, k.Key, k.ValueErr)
		}
		verified = append(verified, string(k.Key))
		return true
	})
	if !slices.Equal(verified, sorted) {
		t.Fatalf("%s: VerifyKeys walked %d keys, want %d", step, len(verified), len(sorted))
	}
}

// sameKeys checks that items are keys, in order, with want's values.
func sameKeys(t *testing.T, what string, items []store.Item, keys []string, want map[string]string) {
	t.Helper()
	if len(items) != len(keys) {
		t.Fatalf("%s: %d items, want %d", what, len(items), len(keys))
	}
	for i, it := range items {
		if !bytes.Equal(it.Key, []byte(keys[i])) || string(it.Value) != want[keys[i]] {
			t.Fatalf("%s: item %d is %q = %q, want %q = %q", what, i, it.Key, it.Value, keys[i], want[keys[i]])
		}
	}
}
