package canonjson

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

var numberSeeds = []string{
	"0", "-0", "1", "-12", "10.50", "1e5", "1E+5", "2.5e-300", "01", "1.", ".5", "-", "+1", "1e", "1e+", "0x1",
	"1e1000", "1e1001", "1e-1001", "1e00000000000000000000001", strings.Repeat("9", NumberDigitsMax),
	strings.Repeat("9", NumberDigitsMax+1), "0." + strings.Repeat("0", NumberDigitsMax), "1 ", "1,", "",
}

// FuzzScanNumber: ScanNumber reads exactly the JSON number grammar
// (encoding/json's), and what it reports about a literal (digits, exponent,
// integer, the limit it breaks) is what the literal says.
func FuzzScanNumber(f *testing.F) {
	for _, s := range numberSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := ScanNumber([]byte(s), 0)
		whole := ok && n.End == len(s)
		isNumber := len(s) > 0 && strings.IndexByte("-0123456789", s[0]) >= 0 &&
			strings.IndexByte("0123456789", s[len(s)-1]) >= 0 && json.Valid([]byte(s))
		if whole != isNumber {
			t.Fatalf("%q: ScanNumber whole literal %v, encoding/json says %v", s, whole, isNumber)
		}
		if ok && n.End < len(s) {
			// The literal ends where the grammar does: the rest cannot
			// extend it.
			if r, ok2 := ScanNumber([]byte(s[:n.End]), 0); !ok2 || r != n {
				t.Fatalf("%q: prefix %q scans as %+v %v, not %+v", s, s[:n.End], r, ok2, n)
			}
		}
		if !whole {
			return
		}
		mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
		if want := strings.Count(mant, "") - 1 - strings.Count(mant, "-") - strings.Count(mant, "."); n.Digits != want {
			t.Fatalf("%q: %d digits, want %d", s, n.Digits, want)
		}
		if n.Integer != (!hasExp && !strings.Contains(mant, ".")) {
			t.Fatalf("%q: integer %v", s, n.Integer)
		}
		e := 0
		if hasExp {
			v, err := strconv.Atoi(exp)
			switch {
			case err != nil || v > NumberExponentMax || v < -NumberExponentMax:
				// Saturated: only its being beyond the limit counts.
				if n.Exp >= -NumberExponentMax && n.Exp <= NumberExponentMax {
					t.Fatalf("%q: exponent %d, want beyond the limit", s, n.Exp)
				}
				e = n.Exp
			default:
				e = v
			}
		}
		if n.Exp != e {
			t.Fatalf("%q: exponent %d, want %d", s, n.Exp, e)
		}
		beyond := n.Digits > NumberDigitsMax || e > NumberExponentMax || e < -NumberExponentMax
		if msg := n.LimitMessage(); (msg != "") != beyond {
			t.Fatalf("%q: limit message %q", s, msg)
		}
	})
}

// TestNumber_LimitMessages: the messages are part of API answers.
func TestNumber_LimitMessages(t *testing.T) {
	n, _ := ScanNumber([]byte("1"+strings.Repeat("0", NumberDigitsMax)), 0)
	if got := n.LimitMessage(); got != "number has 101 digits (max 100 before the exponent)" {
		t.Errorf("digits: %q", got)
	}
	n, _ = ScanNumber([]byte("-1e-1001"), 0)
	if got := n.LimitMessage(); got != "number exponent is beyond ±1000" {
		t.Errorf("exponent: %q", got)
	}
}
