package table

import (
	"cmp"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"

	"github.com/idemdb/idem/internal/canonjson"
)

// Numbers are stored as written and computed on as written: $inc, $max and
// $min use exact decimal arithmetic (coefficient × 10^exponent in big.Int),
// never float64, so no stored value is ever silently rounded. This is
// document semantics and stays here; reading a literal and its limits is
// JSON's, in canonjson. The limits keep every coefficient and exponent small
// enough that exact arithmetic stays cheap, and every result is again a
// literal the parser accepts, so whatever a transform stores can be sent
// back in an insert.

// decimal is an exact number: coef × 10^exp.
type decimal struct {
	coef    big.Int
	exp     int
	integer bool // written without fraction or exponent
}

// parseDecimal reads a literal within the number limits (a stored value
// written before the limits existed may break them: it is refused, not
// computed on at any cost).
func parseDecimal(lit json.Number) (*decimal, error) {
	s := string(lit)
	n, ok := canonjson.ScanNumber([]byte(s), 0)
	if !ok || n.End != len(s) {
		return nil, opError("invalid number " + strconv.Quote(s))
	}
	if msg := n.LimitMessage(); msg != "" {
		return nil, opError(msg)
	}
	mant, frac := s, ""
	if k := strings.IndexAny(s, "eE"); k >= 0 {
		mant = s[:k]
	}
	if k := strings.IndexByte(mant, '.'); k >= 0 {
		mant, frac = mant[:k]+mant[k+1:], mant[k+1:]
	}
	d := &decimal{exp: n.Exp - len(frac), integer: n.Integer}
	d.coef.SetString(mant, 10) // the grammar was checked: cannot fail
	return d, nil
}

// align returns the coefficients of a and b scaled to their smaller exponent.
func align(a, b *decimal) (x, y *big.Int, exp int) {
	x, y = &a.coef, &b.coef
	switch {
	case a.exp > b.exp:
		x = new(big.Int).Mul(x, pow10(a.exp-b.exp))
		exp = b.exp
	case b.exp > a.exp:
		y = new(big.Int).Mul(y, pow10(b.exp-a.exp))
		exp = a.exp
	default:
		exp = a.exp
	}
	return x, y, exp
}

func pow10(n int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil) }

func cmpDecimal(a, b *decimal) int {
	x, y, _ := align(a, b)
	return x.Cmp(y)
}

func addDecimal(a, b *decimal) *decimal {
	x, y, exp := align(a, b)
	d := &decimal{exp: exp, integer: a.integer && b.integer}
	d.coef.Add(x, y)
	return d
}

// render writes d as a JSON number within the number limits, or says why it
// cannot be. The sum of two integers as written is an integer; any other
// result is its shortest exact decimal text (trailing zeros dropped, so 1.5
// + 1.5 is 3 and 1 + 1.0 is 2), in plain notation when that fits the digit
// limit, otherwise as d.ddde±x.
func (d *decimal) render() (json.Number, error) {
	s := d.coef.String()
	sign := ""
	if s[0] == '-' {
		sign, s = "-", s[1:]
	}
	if d.integer {
		if len(s) > numberDigitsMax {
			return "", opError("result has " + strconv.Itoa(len(s)) + " digits (max " + strconv.Itoa(numberDigitsMax) + ")")
		}
		return json.Number(sign + s), nil
	}
	if s == "0" {
		return "0", nil
	}
	t := strings.TrimRight(s, "0")
	n, e := len(t), d.exp+len(s)-len(t)
	var plain int // digits of the plain form
	switch {
	case e >= 0:
		plain = n + e
	case n > -e:
		plain = n
	default:
		plain = 1 - e // 0.000ddd
	}
	if plain <= numberDigitsMax {
		switch {
		case e >= 0:
			return json.Number(sign + t + strings.Repeat("0", e)), nil
		case n > -e:
			return json.Number(sign + t[:n+e] + "." + t[n+e:]), nil
		}
		return json.Number(sign + "0." + strings.Repeat("0", -e-n) + t), nil
	}
	x := e + n - 1 // the exponent of d.ddd
	if n > numberDigitsMax {
		return "", opError("result needs " + strconv.Itoa(n) + " significant digits (max " + strconv.Itoa(numberDigitsMax) + ")")
	}
	if x > numberExponentMax || x < -numberExponentMax {
		return "", opError("result needs an exponent beyond ±" + strconv.Itoa(numberExponentMax))
	}
	m := t[:1]
	if n > 1 {
		m += "." + t[1:]
	}
	return json.Number(sign + m + "e" + strconv.Itoa(x)), nil
}

// addNumbers is $inc: the exact sum of a and b.
func addNumbers(a, b json.Number) (json.Number, error) {
	if x, ok := smallInt(a); ok {
		if y, ok := smallInt(b); ok {
			// The common case, without big.Int: the same exact integer.
			return json.Number(strconv.FormatInt(x+y, 10)), nil
		}
	}
	x, err := parseDecimal(a)
	if err != nil {
		return "", opError("current value: " + err.Error())
	}
	y, err := parseDecimal(b)
	if err != nil {
		return "", err
	}
	return addDecimal(x, y).render()
}

// smallInt parses an integer literal of at most 18 characters: its
// magnitude is below 10^18, so the sum of two cannot overflow int64.
func smallInt(n json.Number) (int64, bool) {
	if len(n) > 18 || strings.ContainsAny(string(n), ".eE") {
		return 0, false
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	return v, err == nil
}

// compareNumbers orders two numbers by value (1, 1.0 and 1e0 are equal).
func compareNumbers(cur, val json.Number) (int, error) {
	if a, ok := smallInt(cur); ok {
		if b, ok := smallInt(val); ok {
			return cmp.Compare(a, b), nil
		}
	}
	x, err := parseDecimal(cur)
	if err != nil {
		return 0, opError("current value: " + err.Error())
	}
	y, err := parseDecimal(val)
	if err != nil {
		return 0, err
	}
	return cmpDecimal(x, y), nil
}

// equalNumbers is equality by value; a literal beyond the limits (stored
// before they existed) equals only the same text.
func equalNumbers(a, b json.Number) bool {
	if a == b {
		return true
	}
	c, err := compareNumbers(a, b)
	return err == nil && c == 0
}
