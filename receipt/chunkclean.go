package receipt

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
)

// cleanChunk cleans the receipts of chunk c that are due and settled, as
// plain entries' are, then writes the chunk again with what stays (pinned
// by debt, unreadable, or not yet due), or deletes it when nothing does —
// the chunk last, in an Apply of its own, so that a crash leaves it to be
// walked again, and its receipts already deleted then are strays. Every
// Apply is fenced by the cleaner's job lease.
func (rt *retention) cleanChunk(ctx context.Context, jobVer store.Version, c rcptChunk, now time.Time) (int, error) {
	nowMs := now.UnixMilli()
	var stay []chunkedReceipt
	var victims []victim
	for _, e := range c.entries {
		if e.deadline > nowMs {
			stay = append(stay, e)
			continue
		}
		v, ok := rt.cleanableAt(ctx, victim{id: e.id}, e.deadline)
		switch {
		case !ok:
			stay = append(stay, e)
		case v.receipt:
			victims = append(victims, v)
		} // else a stray: the receipt is gone, or has another entry
	}
	cleaned := 0
	for page := rt.cleanPageMax(); len(victims) > 0; {
		n := min(page, len(victims))
		// A copy: deleteVictims drops a refused victim by compacting the
		// slice it is given, and the loop below must see every one.
		done, err := rt.deleteVictims(ctx, jobVer, slices.Clone(victims[:n]))
		cleaned += done
		if err != nil {
			return cleaned, err
		}
		// A victim whose condition failed is still there: it stays.
		for _, v := range victims[:n] {
			rec, _, err := rt.core.load(ctx, v.id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err == nil && rec.RetainUntil != v.deadline {
				continue // moved on: another entry has it
			}
			stay = append(stay, chunkedReceipt{id: v.id, deadline: v.deadline})
		}
		victims = victims[n:]
	}
	if len(stay) == len(c.entries) {
		return cleaned, nil // nothing to write
	}
	slices.SortFunc(stay, func(a, b chunkedReceipt) int { // a listing's order
		return cmp.Or(cmp.Compare(a.deadline, b.deadline), strings.Compare(a.id, b.id))
	})
	b := new(store.Batch).AtVersion(lease.JobKey(cleanerJob), jobVer).AtVersion(c.key, c.version)
	if len(stay) == 0 {
		b.Delete(c.key)
	} else {
		b.Put(c.key, encodeRcptChunk(stay))
	}
	if err := fault.Inject(fault.ChunkCleanBefore); err != nil {
		return cleaned, err
	}
	_, err := rt.core.store.Apply(ctx, b)
	switch classifyWrite(err, lease.JobKey(cleanerJob)) {
	case writeDone, writeRetry: // retry: the next pass walks it again
		return cleaned, nil
	case writeFenced:
		rt.core.stats.fenced.Add(1)
		return cleaned, lease.ErrFenced
	}
	return cleaned, err
}
