package check

import (
	"path/filepath"
	"strings"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/wal"
)

// checkLog verifies every segment by the log's own rules (wal.Verify: the
// torn-tail judgement of repair on open, Replay's rule that only the last
// segment may be torn, contiguous segments), decodes every batch body as
// replay would, and collects the checkpoints the log records writing.
// Replay reads only the entries after the checkpoint tip; Dir reads them
// all, so damage to entries already checkpointed is found too.
func (c *checker) checkLog() {
	walDir := filepath.Join(c.dir, engine.WALDirName)
	// Open's adjustments (GroupBytesMax) decide what repair may cut.
	opts := engine.Options{WAL: c.opts.WAL, FS: c.fs}.WALOptions()
	sum := &c.rep.WAL
	vr, err := wal.Verify(walDir, opts, func(e wal.VerifiedEntry) {
		sum.Frames++
		switch e.Kind {
		case wal.KindBatch:
			sum.Batches++
			if err := engine.VerifyBatch(e.Body); err != nil {
				c.problem(ProblemDamage, filepath.Join(walDir, e.Segment), OffsetUnknown,
					"entry %d: its checksum holds but its batch does not decode (%v), so it was written so; replay refuses it", e.Index, err)
			}
		case wal.KindCheckpoint:
			sum.Records++
			if n, ok := engine.RecordedCheckpoint(e.Body); ok {
				c.recorded = append(c.recorded, n)
			}
			if n, ok := engine.RecordedMerge(e.Body); ok {
				c.merges[store.Version(n)] = true
			}
		}
	})
	if err != nil {
		c.problem(ProblemDamage, walDir, OffsetUnknown, "the log cannot be read: %v", err)
		return
	}
	c.logRead = true
	for _, s := range vr.Segments {
		sum.Segments = append(sum.Segments, Segment{Name: s.Name, First: s.First, Frames: s.Frames, Bytes: s.Bytes})
		sum.Bytes += s.Bytes
	}
	sum.FirstIndex, sum.LastIndex, sum.Marker = vr.FirstIndex, vr.LastIndex, vr.Marker
	if t := vr.Torn; t.Segment != "" {
		c.problem(ProblemTornTail, filepath.Join(walDir, t.Segment), t.CutOffset,
			"the final group write was cut short by a crash, so it was never acknowledged: the next open cuts its %d bytes (%s)", t.DroppedLen, t.Why)
	}
	for _, d := range vr.Damage {
		c.problem(ProblemDamage, d.Path, d.Offset, "entry %d: %s", d.Index, d.Reason)
	}
	if vr.Marker == wal.MarkerDamaged {
		c.problem(ProblemDamage, filepath.Join(walDir, vr.MarkerFile), OffsetUnknown,
			"the close marker does not decode: it is written whole and renamed into place, so its bytes changed afterwards (an open ignores it if the last segment's end is intact)")
	}
	for _, f := range vr.DamageFiles {
		what := "a whole-segment copy an earlier version made of a damaged segment"
		if strings.Contains(f.Name, ".torn-") {
			what = "the bytes an earlier open cut off a torn tail"
		}
		c.problem(ProblemNote, filepath.Join(walDir, f.Name), OffsetUnknown, "%s (%d bytes), kept for inspection: safe to delete, and removed with its segment", what, f.Bytes)
	}
	if vr.StartIndex > 0 {
		c.problem(ProblemNote, walDir, OffsetUnknown,
			"an interrupted truncation at entry %d (a .START file of an earlier version): the next open completes it", vr.StartIndex)
	}
	c.noteStrangers(walDir, vr)
}

// noteStrangers notes files in the log's directory that the log does not
// know: nothing reads them, but an operator may want to know.
func (c *checker) noteStrangers(walDir string, vr wal.VerifyReport) {
	ents, err := c.fs.ReadDir(walDir)
	if err != nil {
		return
	}
	known := map[string]bool{vr.MarkerFile: true}
	for _, s := range vr.Segments {
		known[s.Name] = true
	}
	for _, f := range vr.DamageFiles {
		known[f.Name] = true
	}
	for _, name := range vr.Spares {
		known[name] = true
	}
	for _, e := range ents {
		if name := e.Name(); !known[name] && !strings.HasSuffix(name, ".START") {
			c.problem(ProblemNote, filepath.Join(walDir, name), OffsetUnknown, "not a file of the log's: nothing reads it")
		}
	}
}
