package harness

import "fmt"

// The hot-document workload's own check (issue 37, Config.Hot): a keyed
// batch that only increments is never refused for contention — it waits
// for the documents another batch holds, or is deferred as pending, but is
// never answered transaction_conflict. The models (model.go) check the
// rest as for every workload: each committed increment counted exactly
// once, every answer of a key its first.

// Known gaps: where the receipt layer still refuses increment-only
// batches, a refusal is counted ("hot-refused-<gap>") rather than a
// violation, so that the workload still checks exactly-once under the
// faults that need those shapes; Config.HotStrict (-hot.strict) makes them
// violations too. Each is named in docs/harness.md.
const (
	// hotGapShared: nodes sharing one store each latch documents in their
	// own process only (receipt/doclatch.go), so two nodes' batches on one
	// document still race on its condition.
	hotGapShared = "shared"
	// hotGapDeferred: with intent resolution left to maintenance, a
	// committed batch's intents stay on its documents after its latches
	// are released, and the next batch finds them held.
	hotGapDeferred = "deferred"
	// hotGapBareConflict: the injected decision conflict with no readable
	// winner leaves a transaction whose intents hold its documents, for
	// steps after (a restart in between did not free them), so the gap
	// lasts from the first such step to the end of the run.
	hotGapBareConflict = "bare-conflict"
)

// hotGap is the known gap a refusal in this scenario, now, falls in ("":
// none, a violation).
func (sc *scenario) hotGap() string {
	switch {
	case sc.cfg.HotStrict:
		return ""
	case sc.cfg.Variant == Shared:
		return hotGapShared
	case sc.cfg.DeferResolution:
		return hotGapDeferred
	}
	for _, e := range sc.schedule[:sc.stepNo+1] {
		if e.Kind == faultBareConflict {
			return hotGapBareConflict
		}
	}
	return ""
}

// hotRefused judges a transaction_conflict answer to key k's increment-only
// batch of generation gen.
func (sc *scenario) hotRefused(k, gen int, msg string) {
	if gap := sc.hotGap(); gap != "" {
		sc.count("hot-refused-" + gap)
		return
	}
	sc.violate(fmt.Sprintf("key %d gen %d: an increment-only batch was refused for contention at step %d (%s): %s",
		k, gen, sc.stepNo, sc.schedule[sc.stepNo], msg))
}
