package check

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/wal"
)

// Bounds of what the logical load reports.
const (
	// straySamplesMax bounds the keys outside every namespace (and the
	// values that do not read back) named one by one; the rest are
	// counted in one problem.
	straySamplesMax = 16
	// keyShownMax bounds the bytes of a key a problem shows.
	keyShownMax = 64
	// logLinesMax bounds the lines of the open's own log kept as notes.
	logLinesMax = 32
	// logLineBytesMax bounds one line of that log.
	logLineBytesMax = 1 << 20
)

// load builds the state an open would build, by running engine.Open
// itself on a copy-on-write view of the dir (view.go) — its repairs,
// fallbacks and replay are the real ones, their writes stay in memory —
// and counts it by namespace. What the open logs at warning level is kept
// as notes: that is what an operator would read at the next start.
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
	db, err := engine.Open(c.dir, engine.Options{FS: newViewFS(c.fs), CheckpointLogBytes: -1, WAL: walOpts, Logger: logger})
	if err != nil {
		c.noteLog(&logs)
		c.refused(err)
		return
	}
	c.count(db)
	c.rep.Loaded = true
	st := db.Stats()
	rec := st.Recovery
	c.rep.Recovery = Recovery{FromCheckpoint: rec.FromCheckpoint, ReplayedEntries: rec.ReplayedEntries, ReplayedBytes: rec.ReplayedBytes}
	c.rep.ValueLog.Segments, c.rep.ValueLog.Bytes = st.ValueLog.Segments, st.ValueLog.Bytes
	if err := db.Close(); err != nil {
		c.problem(ProblemNote, "", OffsetUnknown, "closing the open under check: %v", err)
	}
	c.noteLog(&logs)
	if tip := c.tip(); tip != rec.FromCheckpoint {
		c.problem(ProblemNote, "", OffsetUnknown,
			"check reads the checkpoint chain to end at %s, but the open loaded %s: a disagreement between check and recovery",
			engine.CheckpointLabel(tip), engine.CheckpointLabel(rec.FromCheckpoint))
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

// count sums the open's keys by namespace, a key in none being damage,
// and reads back every value the value log holds (engine.DB.VerifyKeys).
// The keys outside every namespace are reported before the values.
func (c *checker) count(db *engine.DB) {
	counts := make([]NamespaceCount, len(store.Namespaces))
	for i, ns := range store.Namespaces {
		counts[i].Namespace = ns
	}
	var values []Problem // reported after the stray keys
	db.VerifyKeys(func(k engine.StoredKey) bool {
		c.rep.Keys++
		c.rep.Bytes += k.Bytes
		if k.InValueLog {
			c.rep.ValueLog.Values++
		}
		if k.ValueErr != nil {
			if c.rep.ValueLog.Damaged++; c.rep.ValueLog.Damaged <= straySamplesMax {
				values = append(values, Problem{File: k.ValueFile, Offset: k.ValueOffset, Kind: ProblemDamage,
					Detail: fmt.Sprintf("the value of %q (version %d) does not read back: %v", shownKey(k.Key), k.Version, k.ValueErr)})
			}
		}
		if i := namespaceOf(k.Key); i >= 0 {
			counts[i].Keys++
			counts[i].Bytes += k.Bytes
			return true
		}
		c.rep.StrayKeys++
		c.rep.StrayBytes += k.Bytes
		if c.rep.StrayKeys <= straySamplesMax {
			c.problem(ProblemDamage, "", OffsetUnknown, "key %q (version %d) lies outside every registered namespace", shownKey(k.Key), k.Version)
		}
		return true
	})
	if more := c.rep.StrayKeys - straySamplesMax; more > 0 {
		c.problem(ProblemDamage, "", OffsetUnknown, "%d more keys lie outside every registered namespace (%d keys, %d bytes in all)",
			more, c.rep.StrayKeys, c.rep.StrayBytes)
	}
	c.rep.Namespaces = counts
	c.rep.Problems = append(c.rep.Problems, values...)
	if more := c.rep.ValueLog.Damaged - straySamplesMax; more > 0 {
		c.problem(ProblemDamage, engine.ValueLogDirName, OffsetUnknown, "%d more values in the value log do not read back (%d of %d in all)",
			more, c.rep.ValueLog.Damaged, c.rep.ValueLog.Values)
	}
}

// namespaceOf is the index in store.Namespaces of key's namespace, or -1.
func namespaceOf(key []byte) int {
	for i, ns := range store.Namespaces {
		if ns.Has(key) {
			return i
		}
	}
	return -1
}

func shownKey(key []byte) []byte {
	if len(key) > keyShownMax {
		return append(key[:keyShownMax:keyShownMax], "…"...)
	}
	return key
}

// noteLog turns the open's warnings into notes, up to logLinesMax.
func (c *checker) noteLog(logs *bytes.Buffer) {
	sc := bufio.NewScanner(logs)
	sc.Buffer(nil, logLineBytesMax)
	for n := 0; sc.Scan(); n++ {
		if n == logLinesMax {
			c.problem(ProblemNote, "", OffsetUnknown, "the open logged more warnings than the %d kept here", logLinesMax)
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
