package testknobs_test

import (
	"reflect"
	"testing"

	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/twopc"
)

// TestKnobs_AreNoPublicOption: no exported field of a public Options
// carries a knob's name, so a test-only flow cannot drift back into the
// API a host sets (issue 36, part 3).
func TestKnobs_AreNoPublicOption(t *testing.T) {
	for _, c := range []struct{ options, knobs any }{
		{receipt.Options{}, testknobs.Receipt{}},
		{twopc.Options{}, testknobs.TwoPC{}},
	} {
		opts, knobs := reflect.TypeOf(c.options), reflect.TypeOf(c.knobs)
		for k := range knobs.Fields() {
			if f, ok := opts.FieldByName(k.Name); ok && f.IsExported() {
				t.Errorf("%v.%s is public: the knob belongs in %v alone", opts, k.Name, knobs)
			}
		}
	}
}

// TestWithTestKnobs_SetsEveryKnob: each knob, set alone, changes the
// options it is given (so WithTestKnobs drops none), and no knobs leave
// them as they were.
func TestWithTestKnobs_SetsEveryKnob(t *testing.T) {
	base := receipt.Options{Node: "node-0"}
	if !reflect.DeepEqual(receipt.WithTestKnobs(base, testknobs.Receipt{}), base) {
		t.Error("receipt: no knobs changed the options")
	}
	for _, k := range []testknobs.Receipt{{SeparateDecide: true}, {DeferResolution: true}} {
		if reflect.DeepEqual(receipt.WithTestKnobs(base, k), base) {
			t.Errorf("receipt: %+v left the options unchanged", k)
		}
	}
	if reflect.DeepEqual(twopc.WithTestKnobs(twopc.Options{}, testknobs.TwoPC{DeferResolution: true}), twopc.Options{}) {
		t.Error("twopc: DeferResolution left the options unchanged")
	}
}
