package receipt

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/idemdb/idem/table"
)

// A commit result is stored in the envelope: resultJSON writes exactly
// what encoding/json wrote before it.
func TestResultJSONMatchesEncodingJSON(t *testing.T) {
	for _, r := range []table.Result{{}, {Inserted: 10}, {Inserted: 1, Deleted: 2, Transformed: 3},
		{Inserted: math.MaxInt, Deleted: math.MinInt, Transformed: -1}} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := resultJSON(r); string(got) != string(want) {
			t.Errorf("%+v: got %s, want %s", r, got, want)
		}
	}
}
