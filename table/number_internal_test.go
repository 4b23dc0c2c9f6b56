package table

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/idemdb/idem/internal/canonjson"
)

// FuzzNumberArithmetic: for any two literals within the number limits, $inc
// is the exact big.Rat sum rendered as a literal within the limits (an
// integer when both were integers, else with no trailing fraction zero), or
// a refusal that names the result; $max/$min order and $addToSet equality
// are big.Rat's.
func FuzzNumberArithmetic(f *testing.F) {
	nines := strings.Repeat("9", numberDigitsMax)
	for _, p := range [][2]string{
		{"1", "1"}, {"0.1", "0.2"}, {"9223372036854775807", "1"}, {"-9223372036854775808", "-1"},
		{nines, "1"}, {nines, "-" + nines}, {"1e1000", "1e-1000"}, {"1.5", "1.5"}, {"1", "1.0"},
		{"-0", "0"}, {"1e99", "1e99"}, {"1e-100", "0.0"}, {"9e1000", "9e1000"}, {"-1.25e200", "1e198"},
		{"123456789012345678901234567890", "0.5"}, {"0.30000000000000001", "-0.3"}, {"1E+2", "-1e2"},
	} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ra, ok := withinLimits(a)
		if !ok {
			return
		}
		rb, ok := withinLimits(b)
		if !ok {
			return
		}
		if c, err := compareNumbers(json.Number(a), json.Number(b)); err != nil || c != ra.Cmp(rb) {
			t.Fatalf("compare %s %s = %d, %v; want %d", a, b, c, err, ra.Cmp(rb))
		}
		if eq := equalNumbers(json.Number(a), json.Number(b)); eq != (ra.Cmp(rb) == 0) {
			t.Fatalf("equal %s %s = %v", a, b, eq)
		}
		sum, err := addNumbers(json.Number(a), json.Number(b))
		if err != nil {
			// Refused only when no literal within the limits can write it.
			n, x := significant(new(big.Rat).Add(ra, rb))
			integers := !strings.ContainsAny(a+b, ".eE")
			if !strings.HasPrefix(err.Error(), "result ") ||
				(integers && x+1 <= numberDigitsMax) ||
				(!integers && n <= numberDigitsMax && x >= -numberExponentMax && x <= numberExponentMax) {
				t.Fatalf("%s + %s refused (%v), but it has %d significant digits, exponent %d", a, b, err, n, x)
			}
			return
		}
		rs, ok := withinLimits(string(sum))
		if !ok {
			t.Fatalf("%s + %s = %s, not a literal within the limits", a, b, sum)
		}
		if want := new(big.Rat).Add(ra, rb); rs.Cmp(want) != 0 {
			t.Fatalf("%s + %s = %s, want %s", a, b, sum, want.RatString())
		}
		mant, _, _ := strings.Cut(strings.ToLower(string(sum)), "e")
		integers := !strings.ContainsAny(a, ".eE") && !strings.ContainsAny(b, ".eE")
		switch {
		case integers && strings.ContainsAny(string(sum), ".eE"):
			t.Fatalf("%s + %s = %s: integers must sum to an integer", a, b, sum)
		case strings.Contains(mant, ".") && strings.HasSuffix(mant, "0"):
			t.Fatalf("%s + %s = %s: not the shortest text", a, b, sum)
		}
	})
}

// withinLimits is the value of a JSON number literal the parser accepts.
func withinLimits(s string) (*big.Rat, bool) {
	n, ok := canonjson.ScanNumber([]byte(s), 0)
	if !ok || n.End != len(s) || n.LimitMessage() != "" {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

// significant is r ≠ 0 as d.ddd × 10^x with n digits (n = 1, x = 0 for 0).
func significant(r *big.Rat) (n, x int) {
	if r.Sign() == 0 {
		return 1, 0
	}
	k := 0 // r × 10^k is an integer (r is a sum of decimals: k is bounded)
	ten := big.NewRat(10, 1)
	v := new(big.Rat).Abs(r)
	for !v.IsInt() {
		v.Mul(v, ten)
		k++
	}
	d := strings.TrimRight(v.Num().String(), "0")
	zeros := len(v.Num().String()) - len(d)
	return len(d), len(d) - 1 + zeros - k
}
