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
func (l *lifecycle) maintainSession(ctx context.Context, it store.Item, ms *MaintainStats) {
	id := string(store.NSSession.Suffix(it.Key))[len("open/"):]
	mu := l.sessionLocks[stripeOf(id)]
	if !mu.TryLock() {
		ms.LocalBusy++
		return
	}
	defer mu.Unlock()
	rec, err := l.loadAnySession(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && rec.State != SessionOpen {
		_, err := l.store.Apply(ctx, new(store.Batch).AtVersion(it.Key, it.Version).Delete(it.Key))
		if v := classifyWrite(err, nil); v == writeDone {
			ms.Strays++
		} else {
			l.passedOver("session-stray", v, id, err)
		}
		return
	}
	if err != nil {
		ms.ErrorsSeen++
		l.passedOver("session-load", classifyStep(err), id, err)
		return
	}
	_, ended, err := l.holdSession(ctx, rec.Principal, id)
	var elsewhere *HeldElsewhereError
	switch {
	case ended != nil:
		ms.SessionsEnded++
	case errors.As(err, &elsewhere):
		ms.Deferred++
	case err != nil:
		ms.Deferred++
		l.passedOver("session-end", classifyStep(err), id, err)
	}
}

// loadAnySession reads session id whoever's it is (maintenance).
func (l *lifecycle) loadAnySession(ctx context.Context, id string) (*SessionRecord, error) {
	it, err := l.store.Get(ctx, sessionKey(id))
	if err != nil {
		return nil, err
	}
	return DecodeSession(it.Value)
}
