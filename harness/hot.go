package harness

import "fmt"

// The hot-document workload's own check (issue 37, Config.Hot): a keyed
// batch that only increments is never refused for contention — it waits
// for the documents another batch holds, or is deferred as pending, but is
// never answered transaction_conflict. The models (model.go) check the
// rest as for every workload: each committed increment counted exactly
// once, every answer of a key its first.

// Known gap: where the receipt layer still refuses increment-only
// batches, a refusal is counted ("hot-refused-<gap>") rather than a
// violation, so that the workload still checks exactly-once under the
// faults that need those shapes; Config.HotStrict (-hot.strict) makes it a
// violation too. It is named in docs/harness.md. Two earlier gaps are
// closed: nodes sharing one store re-plan a batch that meets another
// node's (receipt/replan.go, on for the hot workload's shared variant as
// idemd on etcd sets it), and a Begin that meets a decided transaction's
// leftover intents — deferred resolution — resolves them itself
// (twopc/debt.go).
const (
	// hotGapBareConflict: the injected decision conflict with no readable
	// winner leaves a transaction whose intents hold its documents, for
	// steps after (a restart in between did not free them), so the gap
	// lasts from the first such step to the end of the run.
	hotGapBareConflict = "bare-conflict"
)

// hotGap is the known gap a refusal in this scenario, now, falls in ("":
// none, a violation).
func (sc *scenario) hotGap() string {
	if sc.cfg.HotStrict {
		return ""
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
