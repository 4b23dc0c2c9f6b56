package receipt

// recovery finishes what an owner left: the maintenance pass over
// recov/v1 (maintain.go), which live node adopts a dead node's receipt
// first (fairness.go), the reconciliation of a started receipt without
// executing it again and the payment of visibility debt (reconcile.go),
// and an operator's resolution (resolve.go). It advances receipts through
// the flow's steps, never beside them.
type recovery struct {
	core   *core
	exec   *executor
	flow   *flow
	retain *retention
}
