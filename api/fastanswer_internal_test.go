package api

import (
	"math"
	"testing"

	"github.com/idemdb/idem/table"
)

// The key-less batch's answer is written by table.Result.AppendJSON
// instead of writeJSON's encoder: the same bytes, byte for byte.
func TestFastAnswer_TheEncodersBytes(t *testing.T) {
	for _, r := range []table.Result{
		{}, {Inserted: 1}, {Inserted: 10, Deleted: 2, Transformed: 3},
		{Inserted: math.MaxInt, Deleted: math.MaxInt32, Transformed: 1 << 40},
	} {
		if got, want := string(r.AppendJSON(nil)), string(renderJSON(r)); got != want {
			t.Errorf("%+v: %s, encoder %s", r, got, want)
		}
	}
}
