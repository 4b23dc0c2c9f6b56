package fault

import (
	"strings"
	"testing"
)

// TestCheckEnv_RefusesUnknownNames: a GO_FAILPOINTS naming a failpoint
// the build does not have is refused naming it, with a bounded list of
// known names led by its layer's; cataloged names pass, alone or several.
func TestCheckEnv_RefusesUnknownNames(t *testing.T) {
	for _, ok := range []string{
		"",
		WALSyncBefore + `=return("eio")`,
		WALSyncBefore + `=return("eio");` + ReceiptCreateBefore + "=panic",
		ReceiptDecideBefore + "=1*sleep(10000)",
	} {
		if err := CheckEnv(ok); err != nil {
			t.Errorf("CheckEnv(%q) = %v, want nil", ok, err)
		}
	}
	for _, tc := range []struct{ spec, unknown, first string }{
		{"wal/sync-befor=panic", "wal/sync-befor", "wal/"},
		{WALSyncBefore + "=panic;x/y=return(1)", "x/y", ""},
		{"receipt/decide=1*sleep(10)", "receipt/decide", "receipt/"},
	} {
		err := CheckEnv(tc.spec)
		if err == nil {
			t.Fatalf("CheckEnv(%q) = nil, want an error naming %q", tc.spec, tc.unknown)
		}
		msg := err.Error()
		want := `GO_FAILPOINTS names unknown failpoint "` + tc.unknown + `"; known: ` + tc.first
		if !strings.HasPrefix(msg, want) {
			t.Errorf("CheckEnv(%q) = %q, want it to start %q", tc.spec, msg, want)
		}
		if len(msg) > 600 || strings.Count(msg, ",") > knownListedMax {
			t.Errorf("CheckEnv(%q): the message is not bounded (%d bytes): %q", tc.spec, len(msg), msg)
		}
	}
}
