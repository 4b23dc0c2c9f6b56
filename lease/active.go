package lease

import (
	"sync"

	"github.com/idemdb/idem/index"
)

// ActiveSet is the in-memory set of leases this process must keep alive:
// receipts that are still mutable and terminal ones with live debt. The
// receipt layer adds a receipt before the write that publishes it and
// removes it once the receipt is immutable and debt-free, so no published
// mutable receipt is ever missing from the set. Immutable receipts cost no
// periodic writes.
type ActiveSet struct {
	mu        sync.Mutex
	ids       *index.Ordered[string]
	held      map[string]*Held
	cursor    string
	hasCursor bool
}

// NewActiveSet returns an empty set.
func NewActiveSet() *ActiveSet {
	return &ActiveSet{ids: index.NewIDSet(), held: map[string]*Held{}}
}

// Add inserts or replaces h.
func (s *ActiveSet) Add(h *Held) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids.Put(h.ID)
	s.held[h.ID] = h
}

// Remove drops id if it is still held as h (a newer hold is kept).
func (s *ActiveSet) Remove(id string, h *Held) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.held[id]; ok && (h == nil || cur == h) {
		delete(s.held, id)
		s.ids.Delete(id)
	}
}

// Get returns the hold on id.
func (s *ActiveSet) Get(id string) (*Held, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.held[id]
	return h, ok
}

// Len is the number of held receipts.
func (s *ActiveSet) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// NextBatch returns up to n holds after the round-robin cursor and advances
// it, so that successive calls cover the whole set once every ⌈Len/n⌉ calls.
func (s *ActiveSet) NextBatch(n int) []*Held {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := s.ids.NextAfter(make([]string, 0, n), s.cursor, s.hasCursor, n)
	out := make([]*Held, 0, len(ids))
	for _, id := range ids {
		out = append(out, s.held[id])
	}
	if len(ids) > 0 {
		s.cursor, s.hasCursor = ids[len(ids)-1], true
	}
	return out
}
