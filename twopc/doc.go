// Package twopc is Idem's retained two-phase commit (docs/design.md §6).
//
// A transaction has a caller-given, stable ID. Begin writes the coordinator
// record and every participant's prepare (its intents) in one atomic Apply,
// conditioned on neither a record nor a decision existing, so beginning a
// decided transaction again never re-executes it. The decision is a
// create-if-absent record: the first writer wins, and a loser learns the
// winner by reading — ErrDecisionConflict alone is never proof of abort.
// Decisions are retained until their owner (the receipt layer) calls
// Release, so that an owner that crashed can always learn what happened.
// A decided record never changes: every batch this package writes, `with`
// included, is checked for it before the write, and Resolve checks it again
// on what it reads back (record.go).
//
// Every durable step accepts a `with` batch that is applied atomically with
// it: the receipt layer publishes its receipt with Begin and its terminal
// envelope with Decide. On a store that shares one log, BeginCommit chains
// the two writes into one fsync wait (see chain.go); participants that are
// DirectCommitters then stage no intents, and their commit rides in the
// decision link (direct.go). CommitOnce commits such a transaction in one
// write with no record of its own, for a caller whose `with` records the
// outcome (once.go). A Begin that meets a decided transaction's leftover
// intents on its documents resolves that transaction and prepares afresh
// (debt.go).
//
// Begin, Decide, BeginCommit and CommitOnce stage their writes as batches
// first and make them durable through one applier, ApplySteps
// (applysteps.go), which chains linked steps where the store chains and
// applies them one by one elsewhere; the receipt layer writes its own
// publishes through it too.
package twopc
