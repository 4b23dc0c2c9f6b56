package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/idemdb/idem/engine/check"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/wal"
)

var checkCommand = command{
	name:     "check",
	synopsis: "[-json] DATA",
	summary:  "verify a stopped data dir offline",
	doc: "Verify the stopped data dir DATA offline, changing nothing: every log segment frame by frame,\n" +
		"every checkpoint file whole, the checkpoint chain and whether the log reaches back to its tip,\n" +
		"and the state an open builds, counted by namespace.\n\n" +
		"Exit 0 when clean (a torn tail of the last segment, which the next open cuts, is a warning),\n" +
		"1 on damage, 2 when DATA is in use by a running process or is not a data dir.",
	run: runCheck,
}

func runCheck(c command, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(c, stderr)
	asJSON := fs.Bool("json", false, "print the report as one JSON object (check.Report) instead of text")
	pos, err := parseAnywhere(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage // the flag package printed why, and the usage
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "idemctl check: want one data dir, got %d arguments %q\n", len(pos), pos)
		fs.Usage()
		return exitUsage
	}
	rep, err := check.Dir(vfs.Default, pos[0], check.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "idemctl check: %v\n", err)
		return exitUsage
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "idemctl check: %v\n", err)
			return exitUsage
		}
	} else {
		printCheck(stdout, rep)
	}
	if rep.Damaged() {
		return exitDamage
	}
	return exitOK
}

// problemLabels are the words the text report grades problems with.
var problemLabels = map[check.ProblemKind]string{
	check.ProblemDamage:   "DAMAGE",
	check.ProblemTornTail: "warning (torn tail)",
	check.ProblemNote:     "note",
}

var markerLabels = map[wal.MarkerState]string{
	wal.MarkerClean:   "closed cleanly",
	wal.MarkerAbsent:  "not closed cleanly (a crash or a kill stopped it)",
	wal.MarkerDamaged: "its close marker is damaged",
}

// printCheck writes the report for a person to read: a summary, then
// every problem, then the verdict.
func printCheck(w io.Writer, rep *check.Report) {
	l := rep.WAL
	fmt.Fprintf(w, "data dir     %s\n", rep.Dir)
	fmt.Fprintf(w, "log          %d segments, %d frames (entries %d..%d: %d batches, %d checkpoint records), %d bytes, %s\n",
		len(l.Segments), l.Frames, l.FirstIndex, l.LastIndex, l.Batches, l.Records, l.Bytes, markerLabels[l.Marker])
	fmt.Fprintf(w, "checkpoints  %d files\n", len(rep.Checkpoints))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range rep.Checkpoints {
		what := fmt.Sprintf("part %d of base %d", c.Seq, c.Index)
		switch c.Kind {
		case "delta":
			what = fmt.Sprintf("delta %d on base %d after %d", c.Index, c.Base, c.Prev)
		case "legacy":
			what = fmt.Sprintf("single-file checkpoint %d", c.Index)
		}
		ok := "ok"
		if !c.OK {
			ok = "DAMAGED"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d records\t%d bytes\t%s\n", c.Name, what, c.Records, c.Bytes, ok)
	}
	tw.Flush()
	if ch := rep.Chain; ch != nil {
		fmt.Fprintf(w, "chain        base %d and %d deltas, tip %d: an open loads it and replays the log after entry %d\n",
			ch.Base, ch.Deltas, ch.Tip, ch.Tip)
	} else if len(rep.Checkpoints) == 0 && l.FirstIndex <= 1 {
		// A young dir: the first checkpoint comes once -checkpoint-bytes
		// of log are written. Nothing is wrong.
		fmt.Fprintf(w, "chain        no checkpoint yet: an open replays the log (entries %d..%d)\n", l.FirstIndex, l.LastIndex)
	} else {
		fmt.Fprintf(w, "chain        none usable: an open replays the whole log, or refuses\n")
	}
	if rep.Loaded {
		fmt.Fprintf(w, "state        %d keys, %d bytes (an open loads checkpoint %d and replays %d entries)\n",
			rep.Keys, rep.Bytes, rep.Recovery.FromCheckpoint, rep.Recovery.ReplayedEntries)
		for _, n := range rep.Namespaces {
			fmt.Fprintf(tw, "  %s\t%d keys\t%d bytes\n", n.Namespace, n.Keys, n.Bytes)
		}
		if rep.StrayKeys > 0 {
			fmt.Fprintf(tw, "  (no namespace)\t%d keys\t%d bytes\n", rep.StrayKeys, rep.StrayBytes)
		}
		tw.Flush()
	} else {
		fmt.Fprintf(w, "state        not loaded: an open refuses this dir\n")
	}
	damage, torn, notes := rep.Count(check.ProblemDamage), rep.Count(check.ProblemTornTail), rep.Count(check.ProblemNote)
	fmt.Fprintf(w, "problems     %d damage, %d torn tail, %d notes\n", damage, torn, notes)
	for _, p := range rep.Problems {
		where := p.File
		if where == "" {
			where = "(data dir)"
		}
		if p.Offset != check.OffsetUnknown {
			where = fmt.Sprintf("%s at offset %d", where, p.Offset)
		}
		fmt.Fprintf(w, "  %s: %s: %s\n", problemLabels[p.Kind], where, p.Detail)
	}
	switch {
	case damage > 0:
		fmt.Fprintf(w, "result       DAMAGED\n")
	case torn > 0:
		fmt.Fprintf(w, "result       clean, but for a torn tail the next open cuts (never acknowledged: nothing is lost)\n")
	default:
		fmt.Fprintf(w, "result       clean\n")
	}
}
