package receipt

import (
	"context"
	"errors"

	"github.com/idemdb/idem/store"
)

// maintainSession ends, as maintenance, the open session of one open
// entry if it outlived its TTL or its owner is gone (holdSession decides,
// as for a client's step), and removes an entry whose session ended or is
// gone. A session whose stripe another goroutine holds here is passed
// over: that goroutine is working on it.
//
// It walks beside maintainEntry (maintain.go), sharing the pass, its
// budget, its counters and the stray's deletion (dropStray), but not its
// step, for a reason: a receipt's owner left work a successor finishes
// (adopt, then start, reconcile or pay debt), while a session's left
// nothing to finish before its commit is requested — it is ended
// (presumed aborted) by the same decision a client's step takes.
func (ss *sessions) maintainSession(ctx context.Context, it store.Item, ms *MaintainStats) {
	id := string(store.NSSession.Suffix(it.Key))[len("open/"):]
	mu := ss.locks[stripeOf(id)]
	if !mu.TryLock() {
		ms.LocalBusy++
		return
	}
	defer mu.Unlock()
	rec, err := ss.loadAnySession(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && rec.State != SessionOpen {
		ss.recov.dropStray(ctx, it, id, "session-stray", ms)
		return
	}
	if err != nil {
		ms.ErrorsSeen++
		ss.core.passedOver("session-load", classifyStep(err), id, err)
		return
	}
	_, ended, err := ss.holdSession(ctx, rec.Principal, id)
	var elsewhere *HeldElsewhereError
	switch {
	case ended != nil:
		ms.SessionsEnded++
	case errors.As(err, &elsewhere):
		ms.Deferred++
	case err != nil:
		ms.Deferred++
		ss.core.passedOver("session-end", classifyStep(err), id, err)
	}
}

// loadAnySession reads session id whoever's it is (maintenance).
func (ss *sessions) loadAnySession(ctx context.Context, id string) (*SessionRecord, error) {
	it, err := ss.core.store.Get(ctx, sessionKey(id))
	if err != nil {
		return nil, err
	}
	return sessionAt(it.Key, it.Value)
}
