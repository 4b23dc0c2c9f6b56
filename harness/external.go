package harness

import (
	"context"
	"time"

	"github.com/idemdb/idem/store"
)

// externalCallTimeout bounds each call of an external store, in real time:
// the bubble's contexts cannot reach it (see bridge), so this is what ends
// a call a store would otherwise never answer. Far above a loopback
// cluster's latency, and below the test's own timeout.
const externalCallTimeout = 30 * time.Second

// bridge is an external store (Config.Store: etcd, say) as the bubble sees
// it. A store built outside the bubble has goroutines, channels and timers
// of its own outside it (a gRPC connection), and synctest panics when a
// goroutine outside a bubble touches a channel made inside one: so no call
// of the bubble's runs the store itself. Each call is a closure that a
// goroutine outside the bubble runs under a context of its own, and the
// caller waits on a channel made outside too. That wait is not durable, so
// the bubble's clock stands still while the store works: a store call
// takes no simulated time, as the gate's latency is the only one the
// scheduler draws (sim.go). The caller's context is not passed on; a call
// ends within externalCallTimeout.
type bridge struct {
	inner store.Store
	calls chan func() // run by a goroutine outside the bubble
	// replies hands out channels made outside the bubble, one per call.
	replies chan chan struct{}
	done    chan struct{}
}

// newBridge starts the bridge's goroutines: call it outside the bubble.
func newBridge(inner store.Store) *bridge {
	b := &bridge{inner: inner, calls: make(chan func()), replies: make(chan chan struct{}), done: make(chan struct{})}
	go func() {
		for {
			select {
			case fn := <-b.calls:
				go fn()
			case b.replies <- make(chan struct{}, 1):
			case <-b.done:
				return
			}
		}
	}()
	return b
}

// close stops the bridge (not the store: its owner closes it).
func (b *bridge) close() { close(b.done) }

// do runs fn outside the bubble and waits for it.
func (b *bridge) do(fn func(ctx context.Context)) {
	reply := <-b.replies
	b.calls <- func() {
		ctx, cancel := context.WithTimeout(context.Background(), externalCallTimeout)
		defer cancel()
		fn(ctx)
		reply <- struct{}{}
	}
	<-reply
}

func (b *bridge) Get(_ context.Context, key []byte) (it store.Item, err error) {
	b.do(func(ctx context.Context) { it, err = b.inner.Get(ctx, key) })
	return it, err
}

func (b *bridge) Scan(_ context.Context, start, end []byte, limit int) (items []store.Item, err error) {
	b.do(func(ctx context.Context) { items, err = b.inner.Scan(ctx, start, end, limit) })
	return items, err
}

// Capabilities implements store.Store: none, every call one crossing of
// the bubble's edge.
func (b *bridge) Capabilities() store.Capabilities { return store.Capabilities{} }

func (b *bridge) Apply(_ context.Context, batch *store.Batch) (v store.Version, err error) {
	b.do(func(ctx context.Context) { v, err = b.inner.Apply(ctx, batch) })
	return v, err
}

// Limits implements store.Store: the external store's.
func (b *bridge) Limits() store.Limits { return b.inner.Limits() }
