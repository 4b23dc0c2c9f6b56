package receipt

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
)

// Tombstones are cleaned through the expiry index, like receipts, but one
// entry covers a whole cleanup batch's tombstones: a chunk, at
// exp/v1/<the latest ProtectUntil among them>/t<first txn_id>, whose value
// is their transaction IDs, 16 bytes each. An entry per tombstone would
// cost more RAM than the tombstone itself; a chunk costs 16 bytes per
// tombstone and one key per batch. The cleaner's walk of the expiry index
// reaches a chunk once every tombstone in it is due (the batch's receipts
// completed within one pass, so their deadlines differ little).

// tombChunkPrefix begins a chunk's expiry ID: neither a receipt's (hex)
// nor a session's (lease.SessionIDPrefix).
const tombChunkPrefix = "t"

// tombChunk gathers the tombstones one cleanup Apply writes.
type tombChunk struct {
	first string // the first tombstone's txn_id: the chunk's name
	until int64  // the latest ProtectUntil, unix ms
	ids   []byte // 16 bytes per tombstone
}

func (c *tombChunk) add(t *Tombstone) {
	k := tombKey(t.TxnID)
	if k == nil {
		return
	}
	if c.first == "" {
		c.first = t.TxnID
	}
	c.until = max(c.until, t.ProtectUntil.UnixMilli())
	c.ids = append(c.ids, store.NSTomb.Suffix(k)...)
}

func (c *tombChunk) len() int { return len(c.ids) / txnIDBytes }

// into adds the chunk's entry to b (nothing for an empty chunk).
func (c *tombChunk) into(b *store.Batch) {
	if c.len() > 0 {
		b.Put(expiryKey(c.until, tombChunkPrefix+c.first), c.ids)
	}
}

// chunkEntry is a chunk as the cleaner's walk finds it.
type chunkEntry struct {
	key     []byte
	version store.Version
	ids     []string
}

// tombChunkOf reads expiry item it as a chunk; ok is false for any other
// entry. A chunk whose value is not whole IDs is still a chunk (its whole
// IDs are cleaned, the entry deleted): nothing else would ever delete it.
func tombChunkOf(it store.Item) (chunkEntry, bool) {
	_, id, ok := parseExpiryKey(it.Key)
	if !ok || !strings.HasPrefix(id, tombChunkPrefix) {
		return chunkEntry{}, false
	}
	c := chunkEntry{key: it.Key, version: it.Version}
	for raw := it.Value; len(raw) >= txnIDBytes; raw = raw[txnIDBytes:] {
		c.ids = append(c.ids, hex.EncodeToString(raw[:txnIDBytes]))
	}
	return c, true
}

// tombsPerApply is how many tombstones one Apply deletes: each is a delete
// and a condition (its version); the batch adds the job-lease fence, and
// the chunk entry's delete and condition.
func (rt *retention) tombsPerApply() int {
	return min(cleanBatchMax, rt.core.store.Limits().Fit(1, 1, 1, 2))
}

// cleanTombs deletes the tombstones of chunk c whose protection ended by
// now, then the chunk — the chunk last, in the Apply of its last
// tombstones, so that a crash leaves it to be walked again. A tombstone
// still protected is not the one the chunk was written for (its key was
// reused after an earlier tombstone ended, and a later chunk lists it):
// it is left alone, and so is one that does not read (damaged), with the
// chunk. Every Apply is fenced by the cleaner's job lease.
func (rt *retention) cleanTombs(ctx context.Context, jobVer store.Version, c chunkEntry, now time.Time) (int, error) {
	type due struct {
		key []byte
		ver store.Version
	}
	var dues []due
	unreadable := 0
	for _, id := range c.ids {
		it, err := rt.core.store.Get(ctx, tombKey(id))
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if errors.Is(err, store.ErrCorruption) {
			// Damaged on disk: it cannot say whether it still protects, so
			// it stays — it refuses its key either way — and so does the
			// chunk, for a pass after a repair. The rest of the chunk, and
			// the pass, go on.
			rt.core.opts.Logger.Error("receipt: a tombstone does not read; it and its cleanup entry stay (see idemctl check)",
				"txn_id", id, "err", err)
			unreadable++
			continue
		}
		if err != nil {
			return 0, err
		}
		if t, err := decodeTomb(id, it.Value); err == nil && t.ProtectUntil.After(now) {
			continue
		}
		dues = append(dues, due{it.Key, it.Version})
	}
	per, deleted := rt.tombsPerApply(), 0
	for {
		if len(dues) == 0 && unreadable > 0 {
			return deleted, nil
		}
		n := min(per, len(dues))
		b := new(store.Batch).AtVersion(lease.JobKey(cleanerJob), jobVer)
		for _, d := range dues[:n] {
			b.AtVersion(d.key, d.ver).Delete(d.key)
		}
		last := n == len(dues)
		if last && unreadable == 0 {
			b.AtVersion(c.key, c.version).Delete(c.key)
		}
		if err := fault.Inject(fault.TombCleanBefore); err != nil {
			return deleted, err
		}
		_, err := rt.core.store.Apply(ctx, b)
		switch classifyWrite(err, lease.JobKey(cleanerJob)) {
		case writeDone:
			deleted += n
			rt.core.stats.tombsCleaned.Add(uint64(n))
			dues = dues[n:]
			if last {
				return deleted, nil
			}
			continue
		case writeFenced:
			rt.core.stats.fenced.Add(1)
			return deleted, lease.ErrFenced
		case writeRetry:
			// A tombstone, or the chunk, changed since it was read: the
			// next pass reads them again.
			return deleted, nil
		}
		return deleted, err
	}
}
