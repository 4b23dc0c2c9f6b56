package receipt

// flow is the steps every receipt goes through, whatever request made it:
// creation, start, decision, publication and adoption, on an attempt
// (attempt.go), taking what executes a receipt from a planner (plan.go).
// They know nothing of keyed batches, so an interactive session's commit —
// which goes through the same receipt-first retained 2PC (docs/design.md
// §14) — reuses them, sharing recovery, renewal, cleanup and capacity with
// keyed requests instead of copying them.
//
// Concurrency. Every receipt this process works on has at most one local
// flight (executor.flights): the goroutine that holds it is the only one
// here that writes the receipt; duplicates wait on the flight. Across
// processes, ownership is the lease claim and every receipt write is
// fenced by it.
type flow struct {
	core   *core
	exec   *executor
	recov  *recovery
	retain *retention

	// replan plans a pending receipt from the request it stores, for a
	// successor or a retry that executes it (plans.planStored).
	replan planner
}
