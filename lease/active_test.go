package lease_test

import (
	"testing"
	"time"

	"github.com/idemdb/idem/lease"
)

// TestActiveSet_OldestOf: the oldest Since among the holds of one kind,
// whichever kind is older, ignoring holds with no Since, and zero once
// the oldest is removed and nothing else of that kind is held.
func TestActiveSet_OldestOf(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	s := lease.NewActiveSet()
	if got := s.OldestOf(lease.KindReceipt); !got.IsZero() {
		t.Fatalf("empty set: %v", got)
	}
	old := &lease.Held{ID: "aa", Since: t0}
	s.Add(old)
	s.Add(&lease.Held{ID: "bb", Since: t0.Add(time.Minute)})
	s.Add(&lease.Held{ID: "cc"}) // unknown age
	s.Add(&lease.Held{ID: "s1", Kind: lease.KindSession, Since: t0.Add(-time.Hour)})
	if got := s.OldestOf(lease.KindReceipt); !got.Equal(t0) {
		t.Fatalf("oldest receipt: %v, want %v", got, t0)
	}
	if got := s.OldestOf(lease.KindSession); !got.Equal(t0.Add(-time.Hour)) {
		t.Fatalf("oldest session: %v", got)
	}
	s.Remove("aa", old)
	if got := s.OldestOf(lease.KindReceipt); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after removing the oldest: %v", got)
	}
	s.Remove("bb", nil)
	s.Remove("cc", nil)
	if got := s.OldestOf(lease.KindReceipt); !got.IsZero() {
		t.Fatalf("no receipt held: %v", got)
	}
}
