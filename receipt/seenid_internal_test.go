package receipt

import "testing"

// TestSeen_IDForIsBinds: the ID a Seen hands Execute is Bind's for the
// triple asked, whether the Seen was read for that triple (its own ID,
// not hashed again) or for another one, or read nothing.
func TestSeen_IDForIsBinds(t *testing.T) {
	read := Seen{id: Bind("alice", "orders", "k1"), of: bindings{"alice", "orders", "k1"}}
	for _, c := range []struct {
		seen                Seen
		principal, tbl, key string
	}{
		{read, "alice", "orders", "k1"},
		{read, "bob", "orders", "k1"},
		{read, "alice", "invoices", "k1"},
		{read, "alice", "orders", "k2"},
		{read, "alice", "ordersk", "1"},
		{Seen{}, "alice", "orders", "k1"},
		{Seen{id: "0123456789abcdef0123456789abcdef"}, "alice", "orders", "k1"}, // a create's Seen: no triple
	} {
		if got, want := c.seen.idFor(c.principal, c.tbl, c.key), Bind(c.principal, c.tbl, c.key); got != want {
			t.Errorf("idFor(%q, %q, %q) = %s, want Bind's %s", c.principal, c.tbl, c.key, got, want)
		}
	}
}
