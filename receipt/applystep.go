package receipt

import (
	"context"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/twopc"
)

// The receipt layer's own steps of a plan (writeplan.go planOf), named as
// the plan names them. Like the coordinator's (twopc.StepBegin…), they
// are written through the one applier, twopc.ApplySteps (ApplyStep for
// one step), so that what a request applied can be held to its plan step
// by step (writeplan_record_test.go).
const (
	stepPublishNotApplied = "publish not_applied"
	stepPublishPending    = "publish pending"
	stepPublishTerminal   = "publish terminal"
)

// applyStep writes b as the one step name and returns its version; the
// error is the store's, unchanged (classifyWrite reads it).
func (fl *flow) applyStep(ctx context.Context, name string, b *store.Batch) (store.Version, error) {
	return twopc.ApplyStep(ctx, fl.core.store, twopc.Step{Name: name, Batch: b})
}
