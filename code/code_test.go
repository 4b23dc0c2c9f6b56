package code

import "testing"

// TestRegistry_EveryCodeIsConsistent: every code has an HTTP error status,
// a retryable code says how to retry, a non-retryable one with retry_with
// none cannot be fixed by retrying, every code has a problem title — and
// unknown codes read as internal.
func TestRegistry_EveryCodeIsConsistent(t *testing.T) {
	for _, c := range All() {
		info := Lookup(c)
		if info.Status < 400 || info.Status > 599 {
			t.Errorf("%s: status %d is not an error", c, info.Status)
		}
		if info.Retryable && info.RetryWith == None {
			t.Errorf("%s: retryable but retry_with none", c)
		}
		if info.Title == "" {
			t.Errorf("%s: no title", c)
		}
		if !Known(c) {
			t.Errorf("%s: not known", c)
		}
	}
	if Lookup("no_such_code") != Lookup(Internal) || Known("no_such_code") {
		t.Error("an unknown code does not read as internal")
	}
	if e := Errorf(TableNotFound, "table %q", "t"); e.Error() != `table_not_found: table "t"` {
		t.Errorf("Error() = %q", e.Error())
	}
}
