// Package receipt is Idem's exactly-once layer (docs/design.md §4, §5): it binds
// (principal, table, key) to a stable transaction ID, publishes a receipt
// before anything executes, runs the batch through retained 2PC, and stores
// the complete response envelope so that every retry gets the original
// answer. Owners are fenced by leases; a successor adopts a crashed owner's
// receipts and finishes them without a client retry.
//
// # The components, by file
//
// Service (service.go: Open, Close, the loops) is a facade over the
// components it owns, each with explicit links to the ones it calls (no
// embedding: every call names its component, s.flow.create, s.retain.clean…):
//
//	core.go       core: store, coordinator, tables, clock, owner, active set, heartbeat,
//	              counters; it reads, counts and shapes answers, never writes
//	executor.go   executor: the bounded slots and their drain time; it also owns the
//	              flights (flight.go), the document latches (doclatch.go) and the quotas
//	flow.go       flow: the steps of one receipt on an attempt (create, start, decide,
//	              publish, adopt), whatever request made it
//	recovery.go   recovery: maintenance, reconciliation, an operator's resolution
//	retention.go  retention: release, cleaning, folding, chunks and tombstones
//	plan.go       plans: what executes a receipt (a keyed batch live or stored; a session's staging)
//
// Sessions are the fifth component (sessions, session_hold.go), below.
//
// A receipt goes pending → started → terminal (docs/design.md §4). Each step is a
// method of flow on an attempt — the receipt's ID, record, version and
// lease hold (attempt.go) — and reads the error of every write through
// one classification, classifyWrite (verdict.go), whose verdict says what
// the step does next. What executes a receipt comes from a planner
// (plan.go), the one request-specific part, so that other kinds of
// requests (interactive sessions) reuse the steps.
//
//	execute.go    the keyed request: validate, look up, dispatch; take over a mutable receipt
//	verbatim.go   replay a retry of the very same bytes before any parse; hand on what it read
//	createfirst.go on a remote store, create a new key before any lookup, planned from the
//	              table's cached metadata; a refusal of a cached plan is planned again
//	recentkeys.go the keys created or answered here lately: their retries are looked up first
//	receiptkeys.go a receipt's and its tombstone's keys, built once for a request's lookup and create
//	dispatch.go   the pure decisions: dispatch (what a lookup leads to), ownership (what a
//	              lease allows a receipt, and through sessionHoldOf a session), next (what
//	              a held receipt needs), settled
//	writeplan.go  a new receipt's route as a pure function of what create read (routeOf),
//	              and each route's writes as data (planOf; planFor for a participant's
//	              no and for contention): the Applies, their failpoints, the kinds of
//	              keys they write and condition on
//	applystep.go  the receipt layer's own steps of a plan, written through twopc.ApplySteps
//	create.go     publish a new receipt: not_applied, pending, or started with Begin (chained
//	              with the decision on a store that shares one log), by its route
//	create_terminal.go  publish a new receipt already terminal, in the one write that
//	              commits its transaction (twopc.CommitOnce; the default on engine.DB)
//	start.go      start a pending receipt (started + Begin, fenced); make a refusal durable
//	decide.go     decide and publish the terminal envelope; publish a decided outcome
//	adopt.go      hold a mutable receipt: resume our claim, or adopt by CAS
//	fairness.go   which live node adopts a dead node's receipt first (rendezvous rank)
//	reconcile.go  finish a started receipt without executing again; pay visibility debt
//	maintain.go   the recovery pass over recov/v1, on the same steps
//	release.go    release retained decisions of settled receipts
//	clean.go      the retention cleaner over exp/v1, fenced by its job lease
//	expfold.go    the cleaner folds settled retention entries into chunks (one key per 256)
//	chunkclean.go the cleaner cleans a chunk's due receipts, then the chunk
//	tombstone.go  what the cleaner leaves of a receipt: the key refused while protected
//	tombclean.go  the cleaner removes tombstones whose protection ended, chunk by chunk
//	dropfailed.go retry a many-item batch without the item whose condition failed
//	scanaround.go index walks that step past a value that does not read
//	doclatch.go   FIFO latches per document: contention on a hot document is waited out
//	replan.go     Begin tried again, jittered and bounded, when another node's transaction
//	              held a document (contention on a shared store, not a conflict)
//	quota.go, quota_sessions.go  per-principal quotas: requests in flight, open sessions
//	wait.go, flight.go  waiting on another owner, and on a local goroutine (flights)
//	list.go       operators' listing of receipts by state and age, through the indexes
//	resolve.go    an operator's resolution of a stuck started receipt (presumed abort)
//	entrydiff.go  what a 422 key mismatch says differs, from per-entry digests
//	cold.go       ColdValue: which values the engine may keep in its value log
//	formats.go    the record schemas this build reads and writes (idemd -version)
//	recordtimes.go  schema 3: a record's later times as offsets from Created
//	recordenvelope.go  schema 4: a committed batch's envelope as its three counts
//	restorefence.go  a restored store refuses unknown keys first sent before the restore
//
// # The route of one keyed request
//
// A new key on engine.DB, through the files (names are component.method):
//
//	execute.go    Service.Execute: invalid, Canonical and Bind (bind.go), exec.enter (quota.go)
//	execute.go    Service.executeRound → lookUp: req.seen (verbatim.go), else
//	              core.loadWithMeta or core.loadOrTombAt (service.go, tombstone.go) at the
//	              keys keysOf built once (receiptkeys.go)
//	dispatch.go   dispatch(found) = actCreate
//	execute.go    plans.planRequest(With) (plan.go) → flow.create
//	create.go     flow.create: exec.beginFlight (flight.go), the planner (plan.go:
//	              table.Tables.Preflight), exec.acquire (executor.go), exec.latchDocs
//	              (doclatch.go), the store's Capabilities().Chain, coord.Direct and the
//	              SeparateDecide knob are the createFacts; routeOf (writeplan.go)
//	              routes them: a refusal → flow.createNotApplied, no slot or no latch
//	              → flow.createPending, else flow.createStarted on route once
//	create_terminal.go  flow.createTerminal: coord.CommitOnce with the terminal record
//	              (flow.terminal, decide.go; EncodeRecord, record.go) in the one write
//	attempt.go    attempt.publishedOnce; core.countTerminal (stats.go)
//	execute.go    core.promised, core.countAnswer: the answer
//
// The route is once on every store, chaining or not (issue 39). When one
// write cannot commit it (a transaction the coordinator does not commit
// directly, or the SeparateDecide test knob), the route is chained on a
// store that chains — flow.createCommitted (create.go: started and decided
// in one chained Apply) — or begin+decide — flow.begin (start.go: Begin
// with the started receipt) and flow.decide (decide.go: DecideOrLearn with
// the terminal envelope), which is also where once and chained go on when
// their write wrote nothing but a document's condition stopped it
// (createRoute.fallback). planOf
// (writeplan.go) lists each route's writes, and planFor those of a
// participant's no and of contention; every one of them is made by the
// one applier, twopc.ApplySteps (applystep.go for the publishes here),
// under the plan's step names. writeplan_record_test.go holds the plans
// to what the store sees and to the steps the applier received, and
// crashprefix_test.go crashes every prefix of them. Both end in flow.finished (attempt.go) →
// retain.queueRelease (release.go), which maintenance's
// retain.releaseDecisions empties. A retry of the same
// request is dispatch → actReplay → core.settledAnswer (execute.go).
//
// Interactive sessions, the second kind of receipt (docs/sessions.md),
// are the sessions component:
//
//	session.go          the record, its states, keys, IDs and bounds
//	session_begin.go    begin: record, open entry and lease in one Apply
//	session_hold.go     sessions (the component); holding a session: stripe locks,
//	                    ownership, presumed abort
//	session_stage.go    stage and read on a copy of the staging, one fenced Apply a step
//	session_steps.go    the staging kept as steps; dropping an ended session's steps
//	session_commit.go   commit: a receipt whose publishing write ends the session
//	session_end.go      abort, expiry, and the presumed abort of a dead owner's session
//	session_maintain.go maintenance ends sessions that outlived their TTL or owner
//
// Around them: attempt.go (one receipt being advanced), verdict.go
// (classifyWrite), record.go and bind.go (what is stored, under which
// key), invariants.go (what a stored record keeps, checked at encode and
// at decode), envelope.go and answer.go (stored and transient answers),
// unavailable.go (a store that refuses writes), storefull.go (a store near
// its space quota: new work waits), view.go (Lookup), summary.go,
// stats.go, options.go, errors.go (sentinels), causelog.go (sampled
// logging of what maintenance passed over).
//
// Every durable step has its failpoint from fault/catalog.go right before
// its write: receipt/create-before (create.go), receipt/adopt-before
// (adopt.go), receipt/decide-before and receipt/terminal-before
// (decide.go), receipt/release-before (release.go), receipt/clean-before
// (clean.go), receipt/tomb-clean-before (tombclean.go),
// receipt/expiry-fold-before (expfold.go), receipt/chunk-clean-before
// (chunkclean.go) and receipt/maintain-before (maintain.go).
package receipt
