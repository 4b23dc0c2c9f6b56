package lease

import (
	"sync"
	"time"

	"github.com/idemdb/idem/index"
)

// Kind is what a lease holds: a receipt, or an interactive session. The
// active set keeps each kind apart so that renewal shares its batches
// fairly between them (NextBatch).
type Kind uint8

const (
	KindReceipt Kind = iota
	KindSession
	kindCount
)

func (k Kind) String() string {
	if k == KindSession {
		return "session"
	}
	return "receipt"
}

// SessionIDPrefix begins every interactive session's ID and no receipt's
// (a receipt's ID is lowercase hex): the two kinds share the lease
// namespace, and an ID says which kind it holds.
const SessionIDPrefix = "s"

// KindOf is the kind of what id names.
func KindOf(id string) Kind {
	if len(id) > 0 && id[:1] == SessionIDPrefix {
		return KindSession
	}
	return KindReceipt
}

// Kinds lists every kind, in the order their metrics are labelled.
var Kinds = []Kind{KindReceipt, KindSession}

// ActiveSet is the in-memory set of leases this process must keep alive:
// receipts that are still mutable, terminal ones with live debt, and open
// interactive sessions. The receipt layer adds a lease before the write
// that publishes it and removes it once what it holds is immutable and
// debt-free, so no published mutable receipt or open session is ever
// missing from the set. Immutable receipts and ended sessions cost no
// periodic writes.
type ActiveSet struct {
	mu    sync.Mutex
	kinds [kindCount]kindSet
	held  map[string]*Held
	first Kind // the kind NextBatch serves first, in turn
}

// kindSet is one kind's leases in ID order, with its round-robin cursor.
type kindSet struct {
	ids       *index.Ordered[string]
	cursor    string
	hasCursor bool
	served    int // leases handed out in the current round
}

// NewActiveSet returns an empty set.
func NewActiveSet() *ActiveSet {
	s := &ActiveSet{held: map[string]*Held{}}
	for i := range s.kinds {
		s.kinds[i].ids = index.NewIDSet()
	}
	return s
}

// Add inserts or replaces h, under h.Kind.
func (s *ActiveSet) Add(h *Held) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.held[h.ID]; ok && old.Kind != h.Kind {
		s.kinds[old.Kind].ids.Delete(h.ID)
	}
	s.kinds[h.Kind].ids.Put(h.ID)
	s.held[h.ID] = h
}

// Remove drops id if it is still held as h (a newer hold is kept; nil
// drops whatever is held).
func (s *ActiveSet) Remove(id string, h *Held) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.held[id]; ok && (h == nil || cur == h) {
		delete(s.held, id)
		s.kinds[cur.Kind].ids.Delete(id)
	}
}

// Get returns the hold on id.
func (s *ActiveSet) Get(id string) (*Held, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.held[id]
	return h, ok
}

// Len is the number of leases held, of every kind.
func (s *ActiveSet) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// LenOf is the number of leases of kind k held.
func (s *ActiveSet) LenOf(k Kind) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kinds[k].ids.Len()
}

// OldestOf is the earliest Since among the leases of kind k held (zero
// when none has one). It walks the set: the set holds only mutable work
// and debt, and a scrape every few seconds is its only caller.
func (s *ActiveSet) OldestOf(k Kind) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var oldest time.Time
	for _, h := range s.held {
		if h.Kind == k && !h.Since.IsZero() && (oldest.IsZero() || h.Since.Before(oldest)) {
			oldest = h.Since
		}
	}
	return oldest
}

// NextBatch returns up to n holds and advances the cursors, so that
// successive calls cover the whole set once every ⌈Len/n⌉ calls: a round.
// The batch is shared fairly between the kinds: each kind that has leases
// left in the round gets an equal share of n, and a share a kind cannot
// fill goes to the others, so that ten sessions are renewed in the first
// batch however many receipts there are, and the other way round. No kind
// starts its next round before every kind finished this one, so the few
// never crowd the many out of a round either. The kind served first
// alternates, so that the remainder of an uneven split favours neither.
func (s *ActiveSet) NextBatch(n int) []*Held {
	s.mu.Lock()
	defer s.mu.Unlock()
	room := min(n, len(s.held))
	out := make([]*Held, 0, room)
	var order [kindCount]Kind
	for i := range order {
		order[i] = Kind((int(s.first) + i) % int(kindCount))
	}
	s.first = Kind((int(s.first) + 1) % int(kindCount))
	var taken [kindCount]int // by this batch: no lease twice in one batch
	for room > 0 {
		var left [kindCount]int
		pending, unseen := 0, 0
		for k := range s.kinds {
			size := s.kinds[k].ids.Len()
			left[k] = max(min(size-s.kinds[k].served, size-taken[k]), 0)
			pending += left[k]
			unseen += size - taken[k]
		}
		if pending == 0 {
			if unseen == 0 {
				break
			}
			// Every kind finished the round: the next one begins, where
			// each kind's cursor stands.
			for k := range s.kinds {
				s.kinds[k].served = 0
			}
			continue
		}
		want := shares(order, left, room)
		for _, k := range order {
			if want[k] > 0 {
				out = s.kinds[k].next(out, want[k], s.held)
				s.kinds[k].served += want[k]
				taken[k] += want[k]
				room -= want[k]
			}
		}
	}
	return out
}

// shares splits room between the kinds, in order: an equal share each of
// what it has left, then what a kind could not fill to the others.
func shares(order [kindCount]Kind, left [kindCount]int, room int) [kindCount]int {
	var want [kindCount]int
	active := 0
	for _, k := range order {
		if left[k] > 0 {
			active++
		}
	}
	rest := room
	for _, k := range order {
		if left[k] == 0 {
			continue
		}
		want[k] = min((rest+active-1)/active, left[k])
		rest -= want[k]
		active--
	}
	for _, k := range order {
		extra := min(rest, left[k]-want[k])
		want[k] += extra
		rest -= extra
	}
	return want
}

// next appends up to n of ks's holds after its cursor and advances it.
func (ks *kindSet) next(out []*Held, n int, held map[string]*Held) []*Held {
	ids := ks.ids.NextAfter(make([]string, 0, n), ks.cursor, ks.hasCursor, n)
	for _, id := range ids {
		out = append(out, held[id])
	}
	if len(ids) > 0 {
		ks.cursor, ks.hasCursor = ids[len(ids)-1], true
	}
	return out
}
