package harness

import "fmt"

// The hot-document workload's own check (issue 37, Config.Hot): a keyed
// batch that only increments is never refused for contention — it waits
// for the documents another batch holds, or is answered pending with
// nothing stored (receipt/start.go, contended), but is never answered
// transaction_conflict. The models (model.go) check the rest as for every
// workload: each committed increment counted exactly once, every answer of
// a key its first.
//
// There are no known gaps left. The last one — an injected decision
// conflict with no readable winner leaves a transaction of unknown outcome
// whose intents hold its documents — used to turn the batches behind it
// into stored refusals; they are now pending until a retry finds the
// documents free.

// hotRefused judges a transaction_conflict answer to key k's increment-only
// batch of generation gen: always a violation.
func (sc *scenario) hotRefused(k, gen int, msg string) {
	sc.violate(fmt.Sprintf("key %d gen %d: an increment-only batch was refused for contention at step %d (%s): %s",
		k, gen, sc.stepNo, sc.schedule[sc.stepNo], msg))
}
