package receipt

import (
	"time"

	"github.com/idemdb/idem/code"
)

// A store that reports its space (Capabilities().Space: etcdstore with a
// Space watcher) may say it is near its quota. While it is, new work — a
// new key's receipt, an unkeyed batch, a new session — is refused
// store_full, so that what was started (decisions, session commits
// already requested, cleanup) finishes in the room left before the store
// refuses every write (docs/cluster.md).

// storeFullRetryAfter is the Retry-After of a store_full answer: about a
// cleaner pass and a compaction, which free space by themselves.
const storeFullRetryAfter = 30 * time.Second

// storeFullMessage is the detail of every store_full answer.
const storeFullMessage = "the store is near its space quota: new keys and sessions are refused until cleanup and compaction free space (no restart needed); nothing was written, retry later with the same key"

// spaceFull reports whether new work is refused for want of space.
func (c *core) spaceFull() bool {
	sr := c.store.Capabilities().Space
	return sr != nil && sr.SpaceFull()
}

// answerStoreFull refuses a new key: no receipt was created.
func answerStoreFull(txnID string) Answer {
	return Answer{Envelope: fromCode(code.StoreFull, storeFullMessage, txnID, OutcomeNotApplied), RetryAfter: storeFullRetryAfter}
}

// errStoreFull is the *code.Error of new work refused for want of space.
func errStoreFull() error {
	return &code.Error{Code: code.StoreFull, Message: storeFullMessage, RetryAfter: storeFullRetryAfter}
}
