package engine

import (
	"bufio"
	"bytes"
	"errors"
	"log/slog"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/wal"
)

// Bounds of what the logical load reports.
const (
	// checkStraySamplesMax bounds the keys outside every namespace named
	// one by one; the rest are counted in one problem.
	checkStraySamplesMax = 16
	// checkKeyShownMax bounds the bytes of a key a problem shows.
	checkKeyShownMax = 64
	// checkLogLinesMax bounds the lines of the open's own log kept as notes.
	checkLogLinesMax = 32
	// checkLogLineBytesMax bounds one line of that log.
	checkLogLineBytesMax = 1 << 20
)

// RecoveryCheck is what the open under Check did.
type RecoveryCheck struct {
	FromCheckpoint  store.Version `json:"from_checkpoint"` // 0: the whole log
	ReplayedEntries int64         `json:"replayed_entries"`
	ReplayedBytes   int64         `json:"replayed_bytes"`
}

// load builds the state an open would build, by running Open itself on a
// copy-on-write view of the dir (checkfs.go) — its repairs, fallbacks and
// replay are the real ones, their writes stay in memory — and counts it by
// namespace. What the open logs at warning level is kept as notes: that
// is what an operator would read at the next start.
//
// It costs what an open costs: the whole store in memory, for as long as
// the counting takes.
func (c *checker) load() {
	var logs bytes.Buffer
	defer func() {
		// A server would crash here too; a checker says so instead.
		if p := recover(); p != nil {
			c.noteLog(&logs)
			c.problem(ProblemDamage, "", OffsetUnknown, "an open of this dir panics: %v", p)
		}
	}()
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn, ReplaceAttr: withoutTimeAndLevel}))
	walOpts := c.opts.WAL
	walOpts.Logger = logger
	db, err := Open(c.dir, Options{FS: newViewFS(c.fs), CheckpointLogBytes: -1, WAL: walOpts, Logger: logger})
	if err != nil {
		c.noteLog(&logs)
		c.refused(err)
		return
	}
	c.count(db)
	c.values(db)
	c.rep.Loaded = true
	rec := db.recovery
	c.rep.Recovery = RecoveryCheck{FromCheckpoint: rec.FromCheckpoint, ReplayedEntries: rec.ReplayedEntries, ReplayedBytes: rec.ReplayedBytes}
	if err := db.Close(); err != nil {
		c.problem(ProblemNote, "", OffsetUnknown, "closing the open under check: %v", err)
	}
	c.noteLog(&logs)
	if tip := c.tip(); tip != rec.FromCheckpoint {
		c.problem(ProblemNote, "", OffsetUnknown,
			"check reads the checkpoint chain to end at %s, but the open loaded %s: a disagreement between check and recovery",
			checkpointLabel(uint64(tip)), checkpointLabel(uint64(rec.FromCheckpoint)))
	}
}

func (c *checker) tip() store.Version {
	if c.rep.Chain == nil {
		return 0
	}
	return c.rep.Chain.Tip
}

// refused reports an open's refusal, naming the file and offset it names.
func (c *checker) refused(err error) {
	file, offset := c.dir, int64(OffsetUnknown)
	var we *wal.CorruptionError
	var ce *store.CorruptionError
	switch {
	case errors.As(err, &we):
		file, offset = we.Path, we.Offset
	case errors.As(err, &ce) && ce.File != "":
		file = ce.File
	}
	c.problem(ProblemDamage, file, offset, "an open refuses this dir: %v", err)
}

// count sums the open's tree by namespace; a key in none is damage.
func (c *checker) count(db *DB) {
	counts := make([]NamespaceCount, len(store.Namespaces))
	for i, ns := range store.Namespaces {
		counts[i].Namespace = ns
	}
	db.treeMu.RLock()
	defer db.treeMu.RUnlock()
	db.tree.AscendAll(func(it index.KV) bool {
		key := it.Key()
		n := int64(len(key) + len(it.Value()))
		c.rep.Keys++
		c.rep.Bytes += n
		for i, ns := range store.Namespaces {
			if ns.Has(key) {
				counts[i].Keys++
				counts[i].Bytes += n
				return true
			}
		}
		c.rep.StrayKeys++
		c.rep.StrayBytes += n
		if c.rep.StrayKeys <= checkStraySamplesMax {
			c.problem(ProblemDamage, "", OffsetUnknown, "key %q (version %d) lies outside every registered namespace", shownKey(key), it.Version())
		}
		return true
	})
	if more := c.rep.StrayKeys - checkStraySamplesMax; more > 0 {
		c.problem(ProblemDamage, "", OffsetUnknown, "%d more keys lie outside every registered namespace (%d keys, %d bytes in all)",
			more, c.rep.StrayKeys, c.rep.StrayBytes)
	}
	c.rep.Namespaces = counts
}

func shownKey(key []byte) []byte {
	if len(key) > checkKeyShownMax {
		return append(key[:checkKeyShownMax:checkKeyShownMax], "…"...)
	}
	return key
}

// noteLog turns the open's warnings into notes, up to checkLogLinesMax.
func (c *checker) noteLog(logs *bytes.Buffer) {
	sc := bufio.NewScanner(logs)
	sc.Buffer(nil, checkLogLineBytesMax)
	for n := 0; sc.Scan(); n++ {
		if n == checkLogLinesMax {
			c.problem(ProblemNote, "", OffsetUnknown, "the open logged more warnings than the %d kept here", checkLogLinesMax)
			return
		}
		c.problem(ProblemNote, "", OffsetUnknown, "an open would log: %s", sc.Text())
	}
}

func withoutTimeAndLevel(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey) {
		return slog.Attr{}
	}
	return a
}

// ValueLogCheck sums up the value log (vlog.go) as the loaded state uses it.
type ValueLogCheck struct {
	Segments int   `json:"segments"`
	Bytes    int64 `json:"bytes"`
	// Values counts the values the state keeps there, each read back
	// whole; Damaged those that did not read (each is damage).
	Values  int64 `json:"values"`
	Damaged int64 `json:"damaged"`
}

// values reads back every value the loaded state keeps in the value log:
// its checksum, its framing, and that the record is the key's. The open
// under check has no writers, so its tree is read without its lock.
func (c *checker) values(db *DB) {
	for _, id := range db.vlog.ids() {
		c.rep.ValueLog.Segments++
		c.rep.ValueLog.Bytes += db.vlog.size(id)
	}
	db.tree.AscendAll(func(it index.KV) bool {
		if !it.Indirect() {
			return true
		}
		c.rep.ValueLog.Values++
		ptr, err := decodeVlogPtr(it.Value())
		if err == nil {
			_, err = db.vlog.read(it.Key(), ptr)
		}
		if err == nil {
			return true
		}
		c.rep.ValueLog.Damaged++
		if c.rep.ValueLog.Damaged <= checkStraySamplesMax {
			file, offset := vlogDirName, int64(OffsetUnknown)
			if ptr.seg != 0 {
				file, offset = vlogDirName+"/"+vlogSegName(ptr.seg), int64(ptr.off)
			}
			c.problem(ProblemDamage, file, offset, "the value of %q (version %d) does not read back: %v", shownKey(it.Key()), it.Version(), err)
		}
		return true
	})
	if more := c.rep.ValueLog.Damaged - checkStraySamplesMax; more > 0 {
		c.problem(ProblemDamage, vlogDirName, OffsetUnknown, "%d more values in the value log do not read back (%d of %d in all)",
			more, c.rep.ValueLog.Damaged, c.rep.ValueLog.Values)
	}
}
