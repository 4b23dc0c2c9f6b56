package receipt

import (
	"context"
	"errors"

	"github.com/idemdb/idem/engine"
)

// maintainSession ends, as maintenance, the open session of one open
// entry if it outlived its TTL or its owner is gone (holdSession decides,
// as for a client's step), and removes an entry whose session ended or is
// gone. A session whose stripe another goroutine holds here is passed
// over: that goroutine is working on it.
func (ss *sessions) maintainSession(ctx context.Context, it engine.Item, ms *MaintainStats) {
	id := string(engine.NSSession.Suffix(it.Key))[len("open/"):]
	mu := ss.locks[stripeOf(id)]
	if !mu.TryLock() {
		ms.LocalBusy++
		return
	}
	defer mu.Unlock()
	rec, err := ss.loadAnySession(ctx, id)
	if errors.Is(err, engine.ErrNotFound) || err == nil && rec.State != SessionOpen {
		_, err := ss.core.store.Apply(ctx, new(engine.Batch).AtVersion(it.Key, it.Version).Delete(it.Key))
		if v := classifyWrite(err, nil); v == writeDone {
			ms.Strays++
		} else {
			ss.core.passedOver("session-stray", v, id, err)
		}
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
	return DecodeSession(it.Value)
}
