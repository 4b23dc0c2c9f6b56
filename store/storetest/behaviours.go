package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/idemdb/idem/store"
)

// behaviour is one rule of the store.Store contract and its check.
type behaviour struct {
	name  string
	check func(t *testing.T, s store.Store)
}

var behaviours = []behaviour{
	{"get-missing-is-not-found", func(t *testing.T, s store.Store) { wantAbsent(t, s, "nope") }},
	{"put-then-get", func(t *testing.T, s store.Store) {
		v := mustApply(t, s, new(store.Batch).Put(k("a"), k("1")))
		wantItem(t, s, "a", "1", v)
	}},
	{"one-batch-one-version", func(t *testing.T, s store.Store) {
		v := mustApply(t, s, new(store.Batch).Put(k("a"), k("1")).Put(k("b"), k("2")))
		wantItem(t, s, "a", "1", v)
		wantItem(t, s, "b", "2", v)
	}},
	{"versions-strictly-increase", func(t *testing.T, s store.Store) {
		var last store.Version
		for i := 0; i < 10; i++ {
			v := mustApply(t, s, new(store.Batch).Put(k("a"), []byte{byte(i)}))
			if v <= last {
				t.Fatalf("batch %d: version %d after %d", i, v, last)
			}
			last = v
		}
	}},
	{"later-op-on-a-key-wins", func(t *testing.T, s store.Store) {
		v := mustApply(t, s, new(store.Batch).Put(k("a"), k("1")).Put(k("a"), k("2")))
		wantItem(t, s, "a", "2", v)
		mustApply(t, s, new(store.Batch).Put(k("b"), k("1")).Delete(k("b")))
		wantAbsent(t, s, "b")
		v = mustApply(t, s, new(store.Batch).Delete(k("a")).Put(k("a"), k("3")))
		wantItem(t, s, "a", "3", v)
	}},
	{"delete-removes", func(t *testing.T, s store.Store) {
		mustApply(t, s, new(store.Batch).Put(k("a"), k("1")))
		mustApply(t, s, new(store.Batch).Delete(k("a")))
		wantAbsent(t, s, "a")
		mustApply(t, s, new(store.Batch).Delete(k("never"))) // deleting nothing is a write
	}},
	{"conditions-that-hold", func(t *testing.T, s store.Store) {
		v1 := mustApply(t, s, new(store.Batch).Absent(k("a")).Put(k("a"), k("1")))
		v2 := mustApply(t, s, new(store.Batch).Present(k("a")).AtVersion(k("a"), v1).Absent(k("b")).Put(k("a"), k("2")))
		wantItem(t, s, "a", "2", v2)
		mustApply(t, s, new(store.Batch).AtVersion(k("b"), 0).Put(k("b"), k("1"))) // AtVersion 0 is Absent
	}},
	{"a-failed-condition-writes-nothing-and-names-itself", func(t *testing.T, s store.Store) {
		v := mustApply(t, s, new(store.Batch).Put(k("a"), k("1")))
		for _, c := range []struct {
			b     *store.Batch
			key   string
			kind  store.CondKind
			found store.Version
		}{
			{new(store.Batch).Absent(k("a")), "a", store.MustBeAbsent, v},
			{new(store.Batch).Present(k("z")), "z", store.MustBePresent, 0},
			{new(store.Batch).AtVersion(k("a"), v+100), "a", store.MustBeAtVersion, v},
			{new(store.Batch).AtVersion(k("z"), 7), "z", store.MustBeAtVersion, 0},
			// The first failing condition is the one reported.
			{new(store.Batch).Present(k("a")).Absent(k("a")).Present(k("z")), "a", store.MustBeAbsent, v},
		} {
			c.b.Put(k("a"), k("changed")).Put(k("new"), k("x"))
			_, err := s.Apply(ctx, c.b)
			var ce *store.ConditionError
			if !errors.As(err, &ce) || !errors.Is(err, store.ErrConditionFailed) {
				t.Fatalf("apply: %v, want a *ConditionError", err)
			}
			if !bytes.Equal(ce.Cond.Key, k(c.key)) || ce.Cond.Kind != c.kind || ce.Found != c.found {
				t.Fatalf("condition error %+v, want key %q kind %s found %d", ce, c.key, c.kind, c.found)
			}
			if key, ok := store.FailedKey(err); !ok || !bytes.Equal(key, k(c.key)) {
				t.Fatalf("FailedKey %q %v", key, ok)
			}
			wantItem(t, s, "a", "1", v)
			wantAbsent(t, s, "new")
		}
	}},
	{"invalid-batches-write-nothing", func(t *testing.T, s store.Store) {
		for name, b := range map[string]*store.Batch{
			"nil":            nil,
			"no ops":         new(store.Batch).Absent(k("a")),
			"empty key":      new(store.Batch).Put(nil, k("1")),
			"huge key":       new(store.Batch).Put(make([]byte, store.KeyBytesMax+1), k("1")),
			"empty cond key": new(store.Batch).Present(nil).Put(k("a"), k("1")),
			"bad cond kind":  {Conds: []store.Condition{{Key: k("a"), Kind: 99}}, Ops: []store.Op{{Key: k("a")}}},
		} {
			if _, err := s.Apply(ctx, b); !errors.Is(err, store.ErrInvalidBatch) {
				t.Fatalf("%s: %v, want ErrInvalidBatch", name, err)
			}
		}
		wantAbsent(t, s, "a")
	}},
	{"apply-copies-the-batch", func(t *testing.T, s store.Store) {
		key, val := k("a"), k("1")
		v := mustApply(t, s, new(store.Batch).Put(key, val))
		key[0], val[0] = 'x', 'x'
		wantItem(t, s, "a", "1", v)
	}},
	{"scan-ranges-in-key-order", func(t *testing.T, s store.Store) {
		b := new(store.Batch)
		for _, key := range []string{"c", "a", "e", "b", "d"} {
			b.Put(k(key), k("v"+key))
		}
		v := mustApply(t, s, b)
		for _, c := range []struct {
			start, end string
			nilEnd     bool
			limit      int
			want       string
		}{
			{"a", "", true, 100, "abcde"},
			{"b", "d", false, 100, "bc"},
			{"b", "", true, 2, "bc"},
			{"", "", true, 1, "a"},
			{"bb", "dd", false, 100, "cd"},
			{"f", "", true, 100, ""},
			{"c", "c", false, 100, ""},
		} {
			var end []byte
			if !c.nilEnd {
				end = k(c.end)
			}
			items, err := s.Scan(ctx, k(c.start), end, c.limit)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, it := range items {
				got += string(it.Key)
				if !bytes.Equal(it.Value, k("v"+string(it.Key))) || it.Version != v {
					t.Fatalf("scan item %+v", it)
				}
			}
			if got != c.want {
				t.Fatalf("scan [%q, %q) limit %d: %q, want %q", c.start, c.end, c.limit, got, c.want)
			}
		}
	}},
	{"limits-are-declared-and-enforced", func(t *testing.T, s store.Store) {
		l := s.Limits()
		if l.ApplyOpsMax < 1 || l.ApplyCondsMax < 1 || l.ApplyBytesMax < 1 || l.ScanItemsMax < 1 {
			t.Fatalf("limits %+v: every bound must be positive", l)
		}
		full := new(store.Batch)
		for i := range l.ApplyOpsMax {
			full.Put([]byte(fmt.Sprintf("k%06d", i)), nil)
		}
		mustApply(t, s, full)
		over := new(store.Batch).Put(k("one-too-many"), nil)
		over.Ops = append(over.Ops, full.Ops...)
		if _, err := s.Apply(ctx, over); !errors.Is(err, store.ErrInvalidBatch) {
			t.Fatalf("%d ops: %v, want ErrInvalidBatch", len(over.Ops), err)
		}
		wantAbsent(t, s, "one-too-many")
		conds := new(store.Batch).Put(k("c"), nil)
		for range l.ApplyCondsMax + 1 {
			conds.Absent(k("nope"))
		}
		if _, err := s.Apply(ctx, conds); !errors.Is(err, store.ErrInvalidBatch) {
			t.Fatalf("%d conditions: %v, want ErrInvalidBatch", len(conds.Conds), err)
		}
		if items, err := s.Scan(ctx, nil, nil, l.ScanItemsMax); err != nil || len(items) != min(l.ScanItemsMax, l.ApplyOpsMax) {
			t.Fatalf("scan at the limit: %d items, %v", len(items), err)
		}
	}},
	{"a-scan-sees-a-batch-whole-or-not-at-all", checkScanAtomicity},
	{"scan-limit-is-bounded", func(t *testing.T, s store.Store) {
		for _, limit := range []int{0, -1, s.Limits().ScanItemsMax + 1} {
			if _, err := s.Scan(ctx, k("a"), nil, limit); !errors.Is(err, store.ErrInvalidScan) {
				t.Fatalf("limit %d: %v, want ErrInvalidScan", limit, err)
			}
		}
	}},
	{"get-all-is-get-in-one-view", func(t *testing.T, s store.Store) {
		v := mustApply(t, s, new(store.Batch).Put(k("a"), k("1")).Put(k("c"), k("3")))
		items, err := store.GetAll(ctx, s, k("a"), k("b"), k("c"))
		if err != nil {
			t.Fatal(err)
		}
		want := []store.Item{{Key: k("a"), Value: k("1"), Version: v}, {Key: k("b")}, {Key: k("c"), Value: k("3"), Version: v}}
		for i := range want {
			if !bytes.Equal(items[i].Key, want[i].Key) || !bytes.Equal(items[i].Value, want[i].Value) || items[i].Version != want[i].Version {
				t.Fatalf("GetAll item %d: %+v, want %+v", i, items[i], want[i])
			}
		}
	}},
}
