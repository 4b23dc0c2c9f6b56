package receipt_test

import (
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/receipt"
)

// twoWrites asks for the two-write path (Begin, then the decision: the
// SeparateDecide knob). A transaction that commits directly takes one
// write on every store (issue 39; a wrapper that hides chaining no longer
// forces two), so a test that holds a request between its two writes, or
// looks at what only they leave (a started receipt, a retained decision),
// says so.
func twoWrites(o receipt.Options) receipt.Options {
	return receipt.WithTestKnobs(o, testknobs.Receipt{SeparateDecide: true})
}
