package api

import "net/http"

// headerSlots hands out the one-element value slices of a response's
// header fields from one array: http.Header.Set allocates a slice for each
// field, and a keyed answer sets up to seven. Keys must be in canonical
// form (textproto.CanonicalMIMEHeaderKey): set does not canonicalize.
type headerSlots struct {
	vals [headerSlotsMax]string
	n    int
}

// headerSlotsMax is how many fields one headerSlots serves; more fall back
// to a slice each.
const headerSlotsMax = 8

func (s *headerSlots) set(h http.Header, key, v string) {
	if s.n == len(s.vals) {
		h[key] = []string{v}
		return
	}
	s.vals[s.n] = v
	h[key] = s.vals[s.n : s.n+1 : s.n+1]
	s.n++
}
