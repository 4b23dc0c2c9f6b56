package receipt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
)

// A retained receipt's expiry entry, exp/v1/<deadline>/<txn_id>, is a key
// of 60 bytes and a tree item of its own: in RAM, with the value log
// holding the envelope, it costs more than the receipt's own key and
// pointer. It is needed only twice: by the cleaner when the deadline comes,
// and by an operator's listing. So the cleaner folds entries that have
// settled into chunks,
//
//	exp/v1/c/<the latest deadline among them>/<first txn_id>
//
// whose value lists them, 16 bytes of ID and 8 of deadline each, and goes
// to the value log (ColdValue). A chunk costs one key per
// expiryChunkMax receipts instead of one each. The cleaner reaches a
// chunk when its last receipt is due; no receipt waits more than
// expiryChunkSpan beyond its own deadline, because a chunk spans at most
// that much.
//
// Chunks sort after every plain entry ('c' after the deadlines' digits):
// a walk of the plain entries — the fold's, the cleaner's first — never
// reads a chunk's value from the value log, and the fold needs no cursor,
// because what it walks is only what is left to fold.
//
// The index is a hint, never the truth: a chunk's entry applies to a
// receipt only while the receipt's own RetainUntil is that deadline, as
// a plain entry's does (a receipt that moved on has another entry).

const (
	// rcptChunksPart is the part of the expiry namespace that holds the
	// receipt chunks.
	rcptChunksPart = "c"
	// expiryChunkMax bounds the receipts one chunk lists, and so the
	// entries one fold Apply deletes.
	expiryChunkMax = cleanBatchMax
	// rcptChunkEntryBytes is one listed receipt: ID and deadline (unix ms).
	rcptChunkEntryBytes = txnIDBytes + 8
	// expiryFoldAge is how long after its deadline was set (at least) an
	// entry is folded: a receipt's first entry moves when it completes,
	// and folding it first would only leave a stray. Capped at an eighth
	// of the retention.
	expiryFoldAge = time.Minute
	// expiryChunkSpan bounds the deadlines one chunk spans: how much later
	// than its own deadline a folded receipt may be cleaned. Capped at an
	// eighth of the retention.
	expiryChunkSpan = time.Minute
)

// foldAge and chunkSpan are expiryFoldAge and expiryChunkSpan under the
// retention's cap, in ms.
func (rt *retention) foldAge() int64 {
	return min(expiryFoldAge, rt.core.opts.Retention/8).Milliseconds()
}

func (rt *retention) chunkSpan() int64 {
	return min(expiryChunkSpan, rt.core.opts.Retention/8).Milliseconds()
}

// chunkedReceipt is one receipt a chunk lists.
type chunkedReceipt struct {
	id       string
	deadline int64 // unix ms
}

// rcptChunk is a receipt chunk as a walk of the expiry index finds it.
type rcptChunk struct {
	key     []byte
	version store.Version
	entries []chunkedReceipt
}

func encodeRcptChunk(es []chunkedReceipt) []byte {
	out := make([]byte, 0, len(es)*rcptChunkEntryBytes)
	for _, e := range es {
		raw, err := hex.DecodeString(e.id)
		if err != nil || len(raw) != txnIDBytes {
			continue // not a receipt's ID: nothing to clean
		}
		out = binary.BigEndian.AppendUint64(append(out, raw...), uint64(e.deadline))
	}
	return out
}

// rcptChunkKey is exp/v1/c/<deadline>/<first>.
func rcptChunkKey(deadlineMs int64, first string) []byte {
	return store.NSExpiry.Key(rcptChunksPart, fmt.Sprintf("%020d", deadlineMs), first)
}

// rcptChunksPrefix begins the chunks' part of the expiry namespace; every
// plain entry sorts before it.
var rcptChunksPrefix = store.NSExpiry.Key(rcptChunksPart, "")

func rcptChunksStart() []byte { return bytes.Clone(rcptChunksPrefix) }

// isRcptChunkKey reports whether key is in the chunks' part.
func isRcptChunkKey(key []byte) bool { return bytes.HasPrefix(key, rcptChunksPrefix) }

// rcptChunkOf reads expiry item it as a receipt chunk; ok is false for any
// other entry. A value that is not whole entries still makes a chunk (its
// whole entries are walked): nothing else would ever delete it.
func rcptChunkOf(it store.Item) (rcptChunk, bool) {
	if !isRcptChunkKey(it.Key) {
		return rcptChunk{}, false
	}
	c := rcptChunk{key: it.Key, version: it.Version}
	for raw := it.Value; len(raw) >= rcptChunkEntryBytes; raw = raw[rcptChunkEntryBytes:] {
		c.entries = append(c.entries, chunkedReceipt{
			id:       hex.EncodeToString(raw[:txnIDBytes]),
			deadline: int64(binary.BigEndian.Uint64(raw[txnIDBytes:rcptChunkEntryBytes])),
		})
	}
	return c, true
}

// foldEntry is a plain receipt entry on its way into a chunk.
type foldEntry struct {
	key     []byte
	version store.Version
	chunkedReceipt
}

// foldPerApply is how many entries one fold Apply takes: each is a delete
// and a condition (its version); the batch adds the chunk's put and its
// absence, and the job-lease fence.
func (rt *retention) foldPerApply() int {
	return min(expiryChunkMax, rt.core.store.Limits().Fit(1, 1, 1, 2))
}

// foldFrom is one fold pass: it walks the plain entries not yet due whose
// deadline is at least foldAge old, and writes them as chunks, at most
// CleanScanMax entries read. It answers the receipts folded. Every Apply
// is fenced by the cleaner's job lease.
func (rt *retention) foldFrom(ctx context.Context, jobVer store.Version, now time.Time) (int, error) {
	nowMs := now.UnixMilli()
	start := expiryKey(nowMs+1, "")
	end := expiryKey(nowMs+rt.core.opts.Retention.Milliseconds()-rt.foldAge()+1, "")
	per, page := rt.foldPerApply(), min(CleanScanMax, rt.core.store.Limits().ScanItemsMax)
	var run []foldEntry
	folded := 0
	flush := func() error {
		n, err := rt.foldChunk(ctx, jobVer, run)
		folded += n
		run = run[:0]
		return err
	}
	for scanned := 0; scanned < CleanScanMax; {
		items, damaged, last, err := scanAround(ctx, rt.core.store, start, end, min(page, CleanScanMax-scanned))
		if err != nil {
			return folded, err
		}
		scanned += len(items) + len(damaged) // damaged: tombstone chunks the cleaner logs
		for _, it := range items {
			deadline, id, ok := parseExpiryKey(it.Key)
			if !ok || len(id) != 2*txnIDBytes || lease.KindOf(id) != lease.KindReceipt {
				continue // a session's entry, a tombstone chunk
			}
			if len(run) > 0 && (len(run) == per || deadline > run[0].deadline+rt.chunkSpan()) {
				if err := flush(); err != nil {
					return folded, err
				}
			}
			run = append(run, foldEntry{key: bytes.Clone(it.Key), version: it.Version,
				chunkedReceipt: chunkedReceipt{id: id, deadline: deadline}})
		}
		if last == nil {
			break
		}
		start = append(bytes.Clone(last), 0)
	}
	if len(run) > 0 {
		if err := flush(); err != nil {
			return folded, err
		}
	}
	return folded, nil
}

// foldChunk writes es, in key order, as one chunk and deletes their
// entries, in one Apply; an entry that changed since it was read (its
// receipt completed, or was cleaned) stays out and the rest are retried.
func (rt *retention) foldChunk(ctx context.Context, jobVer store.Version, es []foldEntry) (int, error) {
	for len(es) > 0 {
		chunked := make([]chunkedReceipt, len(es))
		for i, e := range es {
			chunked[i] = e.chunkedReceipt
		}
		// Sorted by key, so the last deadline is the latest.
		key := rcptChunkKey(es[len(es)-1].deadline, es[0].id)
		b := new(store.Batch).AtVersion(lease.JobKey(cleanerJob), jobVer).Absent(key)
		for _, e := range es {
			b.AtVersion(e.key, e.version).Delete(e.key)
		}
		b.Put(key, encodeRcptChunk(chunked))
		if err := fault.Inject(fault.ExpiryFoldBefore); err != nil {
			return 0, err
		}
		_, err := rt.core.store.Apply(ctx, b)
		switch classifyWrite(err, lease.JobKey(cleanerJob)) {
		case writeDone:
			rt.core.stats.folded.Add(uint64(len(es)))
			return len(es), nil
		case writeFenced:
			rt.core.stats.fenced.Add(1)
			return 0, lease.ErrFenced
		case writeRetry:
		default:
			return 0, err
		}
		kept, ok := dropFailed(err, es, func(k []byte, e foldEntry) bool { return bytes.Equal(k, e.key) })
		if !ok {
			// The chunk's own key is taken (or the failure names no
			// entry): the next pass reads them again.
			return 0, nil
		}
		es = kept
	}
	return 0, nil
}
