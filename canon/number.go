package canon

import (
	"errors"
	"strconv"
	"strings"
)

// maxExponent bounds the decimal exponent a number may carry. Beyond it a
// number is rejected rather than expanded: 1e999999999 would otherwise be a
// billion digits long in plain notation, and no tool argument needs it.
const maxExponent = 1_000_000

var errNumberSyntax = errors.New("invalid number")

// scanNumber reads a JSON number literal at *pos, as RFC 8259 spells it,
// and advances *pos past it.
func scanNumber(in []byte, pos *int) ([]byte, error) {
	i := *pos
	start := i
	if i < len(in) && in[i] == '-' {
		i++
	}
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && in[i] >= '1' && in[i] <= '9':
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
	default:
		return nil, errNumberSyntax
	}
	if i < len(in) && in[i] == '.' {
		i++
		d := i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		if i == d {
			return nil, errNumberSyntax
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		d := i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		if i == d {
			return nil, errNumberSyntax
		}
	}
	*pos = i
	return in[start:i], nil
}

// canonicalNumber returns the one spelling of the exact decimal value that
// lit (a valid JSON number literal) denotes. The value is never rounded: it
// is read as a digit string and an exponent, not as a float64, so integers
// beyond 2^53 keep every digit.
//
// The layout is ECMAScript's Number::toString (the one RFC 8785 uses) applied
// to the exact decimal digits: with k significant digits and the decimal
// point n places from the left of them,
//
//	k ≤ n ≤ 21      digits followed by n−k zeros         1e3    → 1000
//	0 < n ≤ 21      digits with a point after n of them  1.50   → 1.5
//	−6 < n ≤ 0      "0." then −n zeros then the digits   1e-3   → 0.001
//	otherwise       d.ddd e±(n−1)                        1.0e30 → 1e+30
//
// so a number that float64 holds exactly in its shortest form is spelled as
// JCS spells it. Negative zero is 0.
func canonicalNumber(lit []byte) (string, error) {
	if plainInteger(lit) {
		return string(lit), nil
	}
	neg := false
	if len(lit) > 0 && lit[0] == '-' {
		neg = true
		lit = lit[1:]
	}
	mant := lit
	exp := 0
	if i := indexAny(lit, 'e', 'E'); i >= 0 {
		mant = lit[:i]
		e := lit[i+1:]
		sign := 1
		if len(e) > 0 && (e[0] == '+' || e[0] == '-') {
			if e[0] == '-' {
				sign = -1
			}
			e = e[1:]
		}
		// Leading zeros in an exponent are legal; skip them before the
		// length check so 1e0000000000001 is still 10.
		for len(e) > 1 && e[0] == '0' {
			e = e[1:]
		}
		if len(e) > 7 {
			return "", errors.New("number exponent out of range")
		}
		v, _ := strconv.Atoi(string(e))
		exp = sign * v
	}
	// Collect the significant digits; exp is the power of ten of the last one.
	var digits []byte
	if i := indexAny(mant, '.'); i >= 0 {
		digits = make([]byte, 0, len(mant)-1)
		digits = append(digits, mant[:i]...)
		digits = append(digits, mant[i+1:]...)
		exp -= len(mant) - i - 1
	} else {
		digits = mant
	}
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
	}
	if len(digits) == 0 {
		return "0", nil
	}
	for digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		exp++
	}
	k := len(digits)
	n := k + exp
	if n > maxExponent || n < -maxExponent {
		return "", errors.New("number exponent out of range")
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	switch {
	case k <= n && n <= 21:
		b.Write(digits)
		for range n - k {
			b.WriteByte('0')
		}
	case 0 < n && n <= 21:
		b.Write(digits[:n])
		b.WriteByte('.')
		b.Write(digits[n:])
	case -6 < n && n <= 0:
		b.WriteString("0.")
		for range -n {
			b.WriteByte('0')
		}
		b.Write(digits)
	default:
		b.WriteByte(digits[0])
		if k > 1 {
			b.WriteByte('.')
			b.Write(digits[1:])
		}
		b.WriteByte('e')
		if n-1 >= 0 {
			b.WriteByte('+')
		}
		b.WriteString(strconv.Itoa(n - 1))
	}
	return b.String(), nil
}

func indexAny(b []byte, c1 byte, more ...byte) int {
	for i, c := range b {
		if c == c1 {
			return i
		}
		for _, m := range more {
			if c == m {
				return i
			}
		}
	}
	return -1
}

// numberString reports the canonical spelling of s when s, trimmed of
// surrounding spaces, is exactly a JSON number (optionally with a leading
// '+'), and false otherwise.
func numberString(s string) (string, bool) {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "+")
	if s == "" {
		return "", false
	}
	b := []byte(s)
	pos := 0
	lit, err := scanNumber(b, &pos)
	if err != nil || pos != len(b) {
		return "", false
	}
	c, err := canonicalNumber(lit)
	if err != nil {
		return "", false
	}
	return c, true
}

// plainInteger reports whether lit is already canonical: an integer of at
// most 21 digits without exponent, and not -0.
func plainInteger(lit []byte) bool {
	d := lit
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
		if len(d) == 1 && d[0] == '0' {
			return false
		}
	}
	if len(d) == 0 || len(d) > 21 {
		return false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
