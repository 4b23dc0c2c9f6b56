package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/idemdb/idem/store"
)

// Fencing: the layers above fence a stale owner's write with a condition
// at the version of a record it read — a receipt's claim, a job lease, a
// node record, a session — so every store must refuse such a write once
// the record moved, whatever the key, and write nothing of it. The
// records that fence live under lease/, so a store that treated those
// keys apart (skipped their compares, cached them) would let a zombie
// owner's terminal write, renewal or cleanup land.

// fenceRecords are the records the check fences on: the lease records
// the layers use (their key shapes, lease/claim.go, lease/job.go,
// lease/owner.go), then one record under every registered namespace and
// one outside them.
func fenceRecords() [][]byte {
	recs := [][]byte{
		store.NSLease.Key("claim", "fence-txn"),
		store.NSLease.Key("job", "fence-cleaner"),
		store.NSLease.Key("node", "fence-node"),
	}
	for _, ns := range store.Namespaces {
		recs = append(recs, ns.Key("fence", "record"))
	}
	return append(recs, []byte("fence/outside"))
}

// fenceMove is one way a fencing record moves after the stale writer
// read it: a successor rewrites it, deletes it, or deletes and recreates
// it.
type fenceMove struct {
	name string
	move func(b *store.Batch, rec []byte) *store.Batch
}

var fenceMoves = []fenceMove{
	{"rewritten", func(b *store.Batch, rec []byte) *store.Batch { return b.Put(rec, []byte("successor")) }},
	{"deleted", func(b *store.Batch, rec []byte) *store.Batch { return b.Delete(rec) }},
	{"recreated", nil}, // deleted, then put again: a new version, not the one read
}

// FencingViolations checks the fencing property on s (a fresh store): for
// every fencing record and every way it moves, a batch conditioned on the
// version read before the move — a put of a new key, and a delete of an
// existing one, as a zombie's terminal write and a zombie cleaner's
// delete — fails with a *store.ConditionError naming the record, and
// neither of its ops lands. It returns each violation; none when the store
// keeps the property.
func FencingViolations(ctx context.Context, s store.Store) []string {
	var out []string
	for i, rec := range fenceRecords() {
		for j, m := range fenceMoves {
			if why := fencedOnce(ctx, s, rec, m, fmt.Sprintf("%d-%d", i, j)); why != "" {
				out = append(out, fmt.Sprintf("a write fenced on %q (%s) %s", rec, m.name, why))
			}
		}
	}
	return out
}

// fencedOnce runs one case: rec is written (its version read), moved,
// then a stale writer's batch is applied under the old version.
func fencedOnce(ctx context.Context, s store.Store, rec []byte, m fenceMove, tag string) string {
	rec = append(bytes.Clone(rec), "/"+tag...)
	created, victim := []byte("fence-created/"+tag), []byte("fence-victim/"+tag)
	read, err := s.Apply(ctx, new(store.Batch).Put(rec, []byte("holder")).Put(victim, []byte("live")))
	if err != nil {
		return fmt.Sprintf("could not be set up: %v", err)
	}
	if m.move != nil {
		_, err = s.Apply(ctx, m.move(new(store.Batch), rec))
	} else if _, err = s.Apply(ctx, new(store.Batch).Delete(rec)); err == nil {
		_, err = s.Apply(ctx, new(store.Batch).Put(rec, []byte("holder")))
	}
	if err != nil {
		return fmt.Sprintf("could not be moved: %v", err)
	}
	_, err = s.Apply(ctx, new(store.Batch).AtVersion(rec, read).Put(created, []byte("zombie")).Delete(victim))
	var ce *store.ConditionError
	if !errors.As(err, &ce) || !bytes.Equal(ce.Cond.Key, rec) {
		return fmt.Sprintf("after the record moved: %v, want a ConditionError on it", err)
	}
	if _, err := s.Get(ctx, created); !errors.Is(err, store.ErrNotFound) {
		return fmt.Sprintf("was refused but its put landed (%v)", err)
	}
	if it, err := s.Get(ctx, victim); err != nil || string(it.Value) != "live" {
		return fmt.Sprintf("was refused but its delete landed (%v)", err)
	}
	return ""
}
