package api

import (
	"context"
	"net/http/httptest"
	"testing"
)

// The principal set in dispatch's context is the one every context the
// handler derives from it sees, without a copy of the request; the
// context still ends when its deadline's cancel runs. A request whose
// context dispatch did not make gets the principal the old way, and a
// principal already set is never overwritten.
func TestWithPrincipal_InPlaceAndSeenThroughDerivedContexts(t *testing.T) {
	base := httptest.NewRequest("GET", "/", nil)
	ctx, cancel := context.WithCancel(base.Context())
	r := base.WithContext(&requestCtx{Context: ctx})
	got := withPrincipal(r, "alice")
	if got != r {
		t.Fatal("a request dispatch made was copied")
	}
	type otherKey struct{}
	derived, stop := context.WithCancel(context.WithValue(got.Context(), otherKey{}, 1))
	defer stop()
	if p := principalOf(derived); p != "alice" {
		t.Fatalf("principal through derived contexts: %q", p)
	}
	if again := withPrincipal(got, "mallory"); principalOf(got.Context()) != "alice" || principalOf(again.Context()) != "mallory" {
		t.Fatalf("a second principal: the first became %q, the second %q", principalOf(got.Context()), principalOf(again.Context()))
	}
	cancel()
	select {
	case <-derived.Done():
	default:
		t.Fatal("a context derived from the request's did not end with it")
	}
	plain := httptest.NewRequest("GET", "/", nil)
	if p := withPrincipal(plain, "bob"); p == plain || principalOf(p.Context()) != "bob" || principalOf(plain.Context()) != "" {
		t.Fatalf("a request dispatch did not make: principal %q", principalOf(p.Context()))
	}
}
