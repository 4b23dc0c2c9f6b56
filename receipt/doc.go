// Package receipt is Idem's exactly-once layer (DESIGN §4, §5): it binds
// (principal, table, key) to a stable transaction ID, publishes a receipt
// before anything executes, runs the batch through retained 2PC, and stores
// the complete response envelope so that every retry gets the original
// answer. Owners are fenced by leases; a successor adopts a crashed owner's
// receipts and finishes them without a client retry.
//
// # The lifecycle, by file
//
// A receipt goes pending → started → terminal (DESIGN §4). Each step is a
// method of lifecycle (lifecycle.go: the machinery every receipt shares,
// which Service embeds) on an attempt — the receipt's ID, record, version
// and lease hold (attempt.go) — and reads the error of every write through
// one classification, classifyWrite (verdict.go), whose verdict says what
// the step does next. What executes a receipt comes from a planner
// (plan.go), the one request-specific part, so that other kinds of
// requests (interactive sessions) can reuse the steps.
//
//	execute.go    the keyed request: validate, look up, dispatch; take over a mutable receipt
//	plan.go       what executes a keyed batch (preflight, participants), live or stored
//	dispatch.go   the pure decisions: dispatch (what a lookup leads to), ownership (what a
//	              lease allows), next (what a held receipt needs), settled
//	create.go     publish a new receipt: not_applied, pending, or started with Begin (chained
//	              with the decision on a store that shares one log)
//	create_terminal.go  publish a new receipt already terminal, in the one write that
//	              commits its transaction (twopc.CommitOnce; the default on engine.DB)
//	start.go      start a pending receipt (started + Begin, fenced); make a refusal durable
//	decide.go     decide and publish the terminal envelope; publish a decided outcome
//	adopt.go      hold a mutable receipt: resume our claim, or adopt by CAS
//	reconcile.go  finish a started receipt without executing again; pay visibility debt
//	maintain.go   the recovery pass over recov/v1, on the same steps
//	release.go    release retained decisions of settled receipts
//	clean.go      the retention cleaner over exp/v1, fenced by its job lease
//	expfold.go    the cleaner folds settled retention entries into chunks (one key per 256)
//	chunkclean.go the cleaner cleans a chunk's due receipts, then the chunk
//	scanaround.go index walks that step past a value that does not read
//	executor.go   the bounded executor's slots
//	wait.go, flight.go  waiting on another owner, and on a local goroutine (flights)
//
// Around them: service.go (Service, Open, Close, the loops), record.go and
// bind.go (what is stored, under which key), envelope.go and answer.go
// (stored and transient answers), unavailable.go (a store that refuses
// writes), view.go (Lookup), summary.go, stats.go, options.go, errors.go
// (sentinels), causelog.go (sampled logging of what maintenance passed
// over).
//
// Every durable step has its failpoint from fault/catalog.go right before
// its write: receipt/create-before (create.go), receipt/adopt-before
// (adopt.go), receipt/decide-before and receipt/terminal-before
// (decide.go), receipt/release-before (release.go), receipt/clean-before
// (clean.go), receipt/tomb-clean-before (tombclean.go),
// receipt/expiry-fold-before (expfold.go), receipt/chunk-clean-before
// (chunkclean.go) and receipt/maintain-before (maintain.go).
package receipt
