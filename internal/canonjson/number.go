package canonjson

import "strconv"

// Number is what ScanNumber found in a JSON number literal: enough to check
// the number limits and, for table's exact arithmetic, to place the decimal
// point without scanning the text again.
type Number struct {
	End     int  // offset just past the literal
	Digits  int  // digits before the exponent, as written (leading zeros included)
	Exp     int  // exponent as written, saturated past NumberExponentMax
	Integer bool // no fraction and no exponent
}

// ScanNumber reads the JSON number grammar at s[i:]; ok is false when it
// breaks. The literal ends where the grammar does: the caller decides
// whether what follows is allowed.
func ScanNumber(s []byte, i int) (n Number, ok bool) {
	n.Integer = true
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
		n.Digits = 1
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i, n.Digits = digits(s, i, n.Digits)
	default:
		return n, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		n.Integer = false
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return n, false
		}
		i, n.Digits = digits(s, i, n.Digits)
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		n.Integer = false
		if i, ok = exponent(s, i+1, &n.Exp); !ok {
			return n, false
		}
	}
	n.End = i
	return n, true
}

// digits skips the decimal digits at s[i:], adding their count to count.
func digits(s []byte, i, count int) (int, int) {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i, count = i+1, count+1
	}
	return i, count
}

// exponent reads an exponent's optional sign and digits at s[i:] into *exp.
// It saturates: a literal past the limit is refused whatever its exponent,
// and a thousand-digit exponent must not overflow an int.
func exponent(s []byte, i int, exp *int) (int, bool) {
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if i >= len(s) || s[i] < '0' || s[i] > '9' {
		return i, false
	}
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		if *exp <= NumberExponentMax {
			*exp = *exp*10 + int(s[i]-'0')
		}
		i++
	}
	if neg {
		*exp = -*exp
	}
	return i, true
}

// LimitMessage says which number limit the literal breaks, or "". It is a
// message, not an error: the parser reports it with the literal's offset,
// table's arithmetic as the reason an op is refused.
func (n Number) LimitMessage() string {
	switch {
	case n.Digits > NumberDigitsMax:
		return "number has " + strconv.Itoa(n.Digits) + " digits (max " + strconv.Itoa(NumberDigitsMax) + " before the exponent)"
	case n.Exp > NumberExponentMax || n.Exp < -NumberExponentMax:
		return "number exponent is beyond ±" + strconv.Itoa(NumberExponentMax)
	}
	return ""
}
