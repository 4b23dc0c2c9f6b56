package receipt

import (
	"hash/maphash"
	"sync"
)

// recentKeys remembers the keys this process lately created or answered
// (createfirst.go): a request for one of them is most likely a retry,
// which one read answers, where a create sent first would cost a Txn that
// writes nothing. It only steers that choice — a key it forgot is created
// first and still answered right (the failed create brings its receipt
// back) — so it is a bounded set of hashes, two generations of at most
// recentKeysMax/2 each: a key is remembered for at least recentKeysMax/2
// keys after it.
type recentKeys struct {
	mu       sync.Mutex
	cur, old map[uint64]struct{}
}

// recentKeysMax bounds the hashes kept (8 bytes each, with map overhead
// about 2 MiB at most).
const recentKeysMax = 1 << 16

var recentSeed = maphash.MakeSeed()

// add remembers id.
func (r *recentKeys) add(id string) {
	h := maphash.String(recentSeed, id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		r.cur = make(map[uint64]struct{})
	}
	if len(r.cur) >= recentKeysMax/2 {
		r.old, r.cur = r.cur, make(map[uint64]struct{}, recentKeysMax/2)
	}
	r.cur[h] = struct{}{}
}

// has says whether id was added lately.
func (r *recentKeys) has(id string) bool {
	h := maphash.String(recentSeed, id)
	r.mu.Lock()
	defer r.mu.Unlock()
	_, inCur := r.cur[h]
	_, inOld := r.old[h]
	return inCur || inOld
}
