package receipt

import (
	"context"
	"fmt"
	"sync"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
)

// A session's staging is kept as steps: each step that changes it (a
// stage, a first read) writes the documents it changed under
// sess/v1/step/<id>/<n>, and the record only its header and counters. A
// step so writes what it changed, not everything staged so far — ten
// stages of ten documents log each document once, not fifty-five times.
// The holder keeps the folded staging in memory at the record's version
// (stagingCache), so a step reads the record only; whoever else needs the
// staging — a new incarnation, another node — folds the steps back.
//
// Steps are written only while the session is open, under its claim; once
// it ended they are dead, read by nobody: the write that ends it deletes
// them when they are few (dropStepsInto), maintenance soon after when they
// are many (ended, dropQueuedSteps), and the cleaner, with the record,
// whatever a crash left.

// stagingCache holds the folded staging of the open sessions this process
// holds, each at the record version it belongs to: at most one entry per
// held session, dropped when it ends here.
type stagingCache struct{ m sync.Map } // id -> cachedStaging

type cachedStaging struct {
	ver store.Version
	st  *table.Staging
}

func (c *stagingCache) put(id string, ver store.Version, st *table.Staging) {
	c.m.Store(id, cachedStaging{ver, st})
}

func (c *stagingCache) drop(id string) { c.m.Delete(id) }

func (c *stagingCache) at(id string, ver store.Version) (*table.Staging, bool) {
	v, ok := c.m.Load(id)
	if !ok || v.(cachedStaging).ver != ver {
		return nil, false
	}
	return v.(cachedStaging).st, true
}

// staging returns the whole staging of open session sa, as of its record:
// from the cache, or folded from its steps. The caller must not change it
// (it Clones it).
func (ss *sessions) staging(ctx context.Context, sa *sessionAttempt) (*table.Staging, error) {
	if st, ok := ss.stagings.at(sa.id, sa.ver); ok {
		return st, nil
	}
	st := sa.rec.Staging.Header()
	prefix := sessionStepPrefix(sa.id)
	start, end := prefix, store.PrefixEnd(prefix)
	page := min(SessionStepsMax, ss.core.store.Limits().ScanItemsMax)
	seen := 0
	for {
		items, err := ss.core.store.Scan(ctx, start, end, page)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			var docs []table.SessionDoc
			if err := cbor.Unmarshal(it.Value, &docs); err != nil {
				return nil, store.RecordError(it.Key, "receipt: session step", err)
			}
			st.Merge(docs)
			seen++
		}
		if len(items) < page {
			break
		}
		start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
	if seen != sa.rec.Steps {
		return nil, fmt.Errorf("receipt: session %s has %d steps stored, its record counts %d", sa.id, seen, sa.rec.Steps)
	}
	ss.stagings.put(sa.id, sa.ver, st)
	return st, nil
}

// stepsInlineMax is how many steps an ending write deletes itself: the
// steps of a short session go in the write that ends it, at no extra
// write; a longer session's are deleted by maintenance soon after
// (queueSteps), or by the cleaner with the record.
func (ss *sessions) stepsInlineMax() int {
	return min(SessionStepsMax, ss.core.store.Limits().ApplyOpsMax/4)
}

// dropStepsInto adds to ending write b the deletion of session id's n
// steps when they are few enough, and reports whether it did.
func (ss *sessions) dropStepsInto(b *store.Batch, id string, n int) bool {
	if n > ss.stepsInlineMax() {
		return false
	}
	for i := 1; i <= n; i++ {
		b.Delete(sessionStepKey(id, i))
	}
	return true
}

// stepDrop is an ended session whose steps are still stored.
type stepDrop struct {
	id    string
	steps int
}

// stepDropQueueMax bounds the ended sessions whose steps wait here for
// maintenance to delete them; beyond it the cleaner does, with the record.
const stepDropQueueMax = 4096

// ended drops what this process kept of session id once it ended, with n
// steps, and queues their deletion unless the ending write did it.
func (ss *sessions) ended(id string, n int, inline bool) {
	ss.stagings.drop(id)
	if !inline && n > 0 {
		ss.queueDrops(stepDrop{id, n})
	}
}

// queueDrops queues ended sessions' steps for maintenance, up to
// stepDropQueueMax; beyond it the cleaner deletes them with the records.
func (ss *sessions) queueDrops(ds ...stepDrop) {
	ss.dropMu.Lock()
	defer ss.dropMu.Unlock()
	ss.dropQ = append(ss.dropQ, ds[:min(len(ds), stepDropQueueMax-len(ss.dropQ))]...)
}

// dropQueuedSteps deletes the steps queued by ended, as maintenance.
func (ss *sessions) dropQueuedSteps(ctx context.Context) {
	ss.dropMu.Lock()
	q := ss.dropQ
	ss.dropQ = nil
	ss.dropMu.Unlock()
	for i, d := range q {
		if err := ss.dropSteps(ctx, d.id, d.steps, nil); err != nil {
			ss.queueDrops(q[i:]...) // the next pass goes on from here
			return
		}
	}
}

// dropSteps deletes the n steps of ended session id, in batches the store
// takes, fenced by fence (the cleaner's job lease) if given. Steps of an
// ended session are read by nobody, so any process may delete them.
func (ss *sessions) dropSteps(ctx context.Context, id string, n int, fence func(*store.Batch)) error {
	per := ss.core.store.Limits().Fit(1, 0, 0, 1)
	for first := 1; first <= n; first += per {
		b := new(store.Batch)
		if fence != nil {
			fence(b)
		}
		for i := first; i < first+per && i <= n; i++ {
			b.Delete(sessionStepKey(id, i))
		}
		if _, err := ss.core.store.Apply(ctx, b); err != nil {
			return err
		}
	}
	return nil
}
