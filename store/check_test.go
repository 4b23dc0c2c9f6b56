package store

import (
	"errors"
	"strings"
	"testing"
)

// TestCheck_RefusesWhatNoStoreAcceptsAndWhatBreaksItsLimits: every rule of
// Check, each on a batch that breaks it alone, is ErrInvalidBatch; the
// same batch within the rules passes.
func TestCheck_RefusesWhatNoStoreAcceptsAndWhatBreaksItsLimits(t *testing.T) {
	small := Limits{ApplyOpsMax: 2, ApplyCondsMax: 1, ApplyBytesMax: 10, ScanItemsMax: 5}
	k := []byte("k")
	cases := []struct {
		name string
		b    *Batch
		l    Limits
		ok   bool
	}{
		{"within", new(Batch).Absent(k).Put(k, []byte("v")), small, true},
		{"nil batch", nil, MaxLimits, false},
		{"no ops", new(Batch).Absent(k), MaxLimits, false},
		{"empty key", new(Batch).Put(nil, nil), MaxLimits, false},
		{"huge key", new(Batch).Put(make([]byte, KeyBytesMax+1), nil), MaxLimits, false},
		{"key at the bound", new(Batch).Put(make([]byte, KeyBytesMax), nil), MaxLimits, true},
		{"empty condition key", new(Batch).Absent(nil).Put(k, nil), MaxLimits, false},
		{"unknown kind", &Batch{Conds: []Condition{{Key: k, Kind: 9}}, Ops: []Op{{Key: k}}}, MaxLimits, false},
		{"too many ops", new(Batch).Put(k, nil).Put(k, nil).Put(k, nil), small, false},
		{"too many conditions", new(Batch).Absent(k).Present(k).Put(k, nil), small, false},
		{"too many bytes", new(Batch).Put(k, make([]byte, 10)), small, false},
		{"a store's limits never above MaxLimits", &Batch{Ops: make([]Op, BatchOpsMax+1)}, Limits{ApplyOpsMax: 1 << 30, ApplyCondsMax: 1 << 30, ApplyBytesMax: 1 << 30}, false},
	}
	for i := range cases[len(cases)-1].b.Ops {
		cases[len(cases)-1].b.Ops[i].Key = k
	}
	for _, c := range cases {
		err := Check(c.b, c.l)
		if c.ok && err != nil {
			t.Errorf("%s: %v, want nil", c.name, err)
		}
		if !c.ok && !errors.Is(err, ErrInvalidBatch) {
			t.Errorf("%s: %v, want ErrInvalidBatch", c.name, err)
		}
	}
}

// TestCheckScan_RefusesALimitOutsideOneToScanItemsMax.
func TestCheckScan_RefusesALimitOutsideOneToScanItemsMax(t *testing.T) {
	l := Limits{ScanItemsMax: 5}
	for limit, ok := range map[int]bool{-1: false, 0: false, 1: true, 5: true, 6: false} {
		err := CheckScan(limit, l)
		if ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidScan)) {
			t.Errorf("limit %d: %v", limit, err)
		}
	}
}

// TestFailed_CopiesTheKeySoTheBatchStaysTheCallers: the error keeps the
// key it names when the caller reuses the batch's bytes, and matches
// ErrConditionFailed with the key FailedKey reports.
func TestFailed_CopiesTheKeySoTheBatchStaysTheCallers(t *testing.T) {
	key := []byte("rcpt/v1/a")
	err := error(Failed(Condition{Key: key, Kind: MustBeAtVersion, Version: 3}, 4))
	copy(key, "XXXX")
	got, ok := FailedKey(err)
	if !ok || string(got) != "rcpt/v1/a" || !errors.Is(err, ErrConditionFailed) {
		t.Fatalf("FailedKey = %q, %v; errors.Is = %v", got, ok, errors.Is(err, ErrConditionFailed))
	}
	if !strings.Contains(err.Error(), "at-version") {
		t.Fatalf("%v does not say what the condition required", err)
	}
}

// TestFit_CountsItemsWithinBothBoundsAndAlwaysAtLeastOne.
func TestFit_CountsItemsWithinBothBoundsAndAlwaysAtLeastOne(t *testing.T) {
	l := Limits{ApplyOpsMax: 128, ApplyCondsMax: 128}
	for _, c := range []struct{ ops, conds, fixedOps, fixedConds, want int }{
		{2, 1, 0, 0, 64}, {1, 2, 0, 0, 64}, {2, 1, 2, 0, 63}, {0, 0, 0, 0, 128}, {200, 0, 0, 0, 1},
	} {
		if got := l.Fit(c.ops, c.conds, c.fixedOps, c.fixedConds); got != c.want {
			t.Errorf("Fit(%d, %d, %d, %d) = %d, want %d", c.ops, c.conds, c.fixedOps, c.fixedConds, got, c.want)
		}
	}
}

// TestCorruptionErrors_MatchErrCorruption: the three shapes of damage all
// answer errors.Is(err, ErrCorruption), and a record's names its key.
func TestCorruptionErrors_MatchErrCorruption(t *testing.T) {
	rec := RecordError([]byte("rcpt/v1/x"), "receipt", errors.New("cbor: bad"))
	for _, err := range []error{&CorruptionError{File: "f", Reason: "r"}, rec, &ValueError{Key: []byte("k"), Err: &CorruptionError{File: "f"}}} {
		if !errors.Is(err, ErrCorruption) {
			t.Errorf("%v does not match ErrCorruption", err)
		}
	}
	if k, ok := DamagedKey(rec); !ok || string(k) != "rcpt/v1/x" {
		t.Fatalf("DamagedKey = %q, %v", k, ok)
	}
}
