package testknobs

// Receipt are receipt.Service's test-only flows (receipt.WithTestKnobs).
type Receipt struct {
	// DeferResolution leaves a committed receipt's intents to maintenance
	// instead of resolving them inside the decision write (it sets
	// TwoPC.DeferResolution on the service's coordinator). It creates
	// visibility debt, so tests and the harness can prove that reads and
	// maintenance pay it.
	DeferResolution bool
	// SeparateDecide makes a new receipt's decision and terminal envelope a
	// second write, waited for after Begin's, as docs/design.md §5 draws the
	// flow. By default a receipt whose transaction commits directly is
	// created terminal in one write (twopc.CommitOnce) on every store, and
	// any other is chained into one fsync wait on a store that chains
	// (twopc.BeginCommit). Tests that hold a receipt in started between
	// the two writes, or crash it there, set it.
	SeparateDecide bool
}

// TwoPC are twopc.Coordinator's test-only flows (twopc.WithTestKnobs).
type TwoPC struct {
	// DeferResolution leaves intents for Resolve instead of resolving every
	// participant inside the Decide write. Remote participants would need
	// it; none exists, so only tests set it, to create visibility debt.
	DeferResolution bool
}
