package table

import "testing"

// TestShard_ContendedTellsContentionFromAConflict: of the failed
// conditions a shard explains (Refusal), contention — worth a fresh Begin
// once the other transaction is decided (receipt/replan.go) — is another
// transaction's intent on a document, or a document changed under a batch
// that computes its states afresh. A document a session read that changed,
// a dropped table, and a key of another shard or table are not.
func TestShard_ContendedTellsContentionFromAConflict(t *testing.T) {
	m := Meta{Name: "t", ID: "tid", Tenant: "alice", Shards: 4}
	batch := &Shard{meta: m, shard: 2}
	session := &Shard{meta: m, shard: 2, fixed: true}
	for _, c := range []struct {
		what    string
		key     []byte
		batch   bool // Contended for a keyed batch's shard
		session bool // ... for a session's (fixed) shard
		mineToo bool // Refusal claims the key
	}{
		{"another transaction's intent", intentKey("tid", 2, "ctr"), true, true, true},
		{"a document changed since it was read", docKey("tid", 2, "ctr"), true, false, true},
		{"the table's metadata (dropped or recreated)", metaKey("alice", "t"), false, false, true},
		{"another shard's document", docKey("tid", 3, "ctr"), false, false, false},
		{"another table's intent", intentKey("other", 2, "ctr"), false, false, false},
	} {
		if got := batch.Contended(c.key); got != c.batch {
			t.Errorf("%s: batch shard Contended = %v, want %v", c.what, got, c.batch)
		}
		if got := session.Contended(c.key); got != c.session {
			t.Errorf("%s: session shard Contended = %v, want %v", c.what, got, c.session)
		}
		if _, _, mine := batch.Refusal(c.key); mine != c.mineToo {
			t.Errorf("%s: Refusal claims it = %v, want %v", c.what, mine, c.mineToo)
		}
	}
}
