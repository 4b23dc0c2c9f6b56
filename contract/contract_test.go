package contract

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/idemdb/idem/internal/apitest"
)

var flagDir = flag.String("contract.dir", "", "directory of recorded exchanges to check (default $"+apitest.EnvDir+")")

// TestRecordedExchangesMatchTheSpec checks every exchange the other
// modules' tests recorded (make test: their run with IDEM_CONTRACT_DIR set,
// then this test with -contract.dir on the same directory) against
// api/openapi.yaml, and lists each mismatch with the test that made it.
// Zero records fail: a recorder that wrote nothing must not pass.
func TestRecordedExchangesMatchTheSpec(t *testing.T) {
	dir := *flagDir
	if dir == "" {
		dir = os.Getenv(apitest.EnvDir)
	}
	if dir == "" {
		t.Skip("no records to check: pass -contract.dir or set " + apitest.EnvDir + " (make test does)")
	}
	recs, err := ReadRecords(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatalf("no exchange recorded in %s: the recording tests did not run with %s=%s, or their recorder is broken", dir, apitest.EnvDir, dir)
	}
	kinds := map[string]int{}
	tests := map[string]bool{}
	for _, r := range recs {
		kinds[r.Kind]++
		tests[r.Package+" "+r.Test] = true
	}
	mismatches := MustLoad(t).CheckRecords(recs)
	t.Logf("checked %d recorded exchanges (%v) from %d tests in %s", len(recs), kinds, len(tests), dir)
	if len(mismatches) > 0 {
		var b strings.Builder
		for _, m := range mismatches {
			b.WriteString("\n")
			b.WriteString(m.String())
		}
		t.Fatalf("%d recorded exchanges (%d distinct) do not match the spec:%s", count(mismatches), len(mismatches), b.String())
	}
}

func count(ms []Mismatch) int {
	n := 0
	for _, m := range ms {
		n += m.N
	}
	return n
}
