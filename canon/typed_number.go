package canon

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/text/currency"
)

// numberForm reads v as a number: "1,250.50", "-3", "+7", "0.5", and with
// words set, number words ("two", "twenty one", "one thousand two hundred
// and fifty").
func (r *typedRules) numberForm(v string, words bool) string {
	if n, ok := parseDecimal(v, r.decimalComma); ok {
		return "number " + n
	}
	if words {
		if n, ok := parseNumberWords(v); ok {
			return "number " + n
		}
	}
	return ""
}

// parseDecimal reads a decimal number as people write it, in its one
// canonical spelling. Thousands separators must group by three; a number
// with a leading zero ("007", "02134": codes, not quantities) and
// exponents are refused. decimalComma swaps the roles of ',' and '.'.
func parseDecimal(v string, decimalComma bool) (string, bool) {
	s := strings.TrimSpace(v)
	group, point := byte(','), byte('.')
	if decimalComma {
		group, point = '.', ','
	}
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	intPart, frac, hasFrac := s, "", false
	if i := strings.IndexByte(s, point); i >= 0 {
		intPart, frac, hasFrac = s[:i], s[i+1:], true
		if !digits(frac) {
			return "", false
		}
	}
	if intPart == "" {
		return "", false
	}
	var lit []byte
	if strings.IndexByte(intPart, group) >= 0 {
		groups := strings.Split(intPart, string(group))
		if len(groups[0]) == 0 || len(groups[0]) > 3 || groups[0][0] == '0' {
			return "", false
		}
		for i, g := range groups {
			if !digits(g) || i > 0 && len(g) != 3 {
				return "", false
			}
			lit = append(lit, g...)
		}
	} else {
		if !digits(intPart) || len(intPart) > 1 && intPart[0] == '0' {
			return "", false
		}
		lit = append(lit, intPart...)
	}
	if hasFrac {
		lit = append(lit, '.')
		lit = append(lit, frac...)
	}
	if neg {
		lit = append([]byte{'-'}, lit...)
	}
	n, err := canonicalNumber(lit)
	return n, err == nil
}

var unitWords = map[string]int64{"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
	"six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
	"thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
	"eighteen": 18, "nineteen": 19}

var tensWords = map[string]int64{"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
	"sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}

var scaleWords = map[string]int64{"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}

// parseNumberWords reads an English cardinal number: "two", "twenty one",
// "twenty-one", "a hundred", "one thousand six hundred and twenty". Any
// word out of its place ("one two", "twenty thirty", "hundred hundred")
// makes it not a number.
func parseNumberWords(v string) (string, bool) {
	f := strings.Fields(strings.ToLower(strings.ReplaceAll(v, "-", " ")))
	if len(f) == 0 || len(f) > 16 {
		return "", false
	}
	var total, cur int64
	lastScale := int64(0) // the scale last closed (thousand, million…)
	// What the current group (below a thousand) holds so far.
	hasHundred, hasTens, hasUnit, seen := false, false, false, false
	afterAnd := false
	for i, w := range f {
		switch {
		case w == "a" && i == 0 && len(f) > 1:
			cur, hasUnit = 1, true
		case w == "and":
			if !hasHundred && lastScale == 0 || hasTens || hasUnit || afterAnd || i == len(f)-1 {
				return "", false
			}
			afterAnd = true
			continue
		case unitWords[w] > 0 || w == "zero":
			u := unitWords[w]
			if hasUnit || hasTens && u >= 10 || w == "zero" && len(f) > 1 {
				return "", false
			}
			cur += u
			hasUnit = true
		case tensWords[w] > 0:
			if hasTens || hasUnit {
				return "", false
			}
			cur += tensWords[w]
			hasTens = true
		case w == "hundred":
			if hasHundred || !hasUnit && !hasTens || cur == 0 || afterAnd {
				return "", false
			}
			cur *= 100
			hasHundred, hasTens, hasUnit = true, false, false
		case scaleWords[w] > 0:
			sc := scaleWords[w]
			if cur == 0 || lastScale != 0 && sc >= lastScale || afterAnd {
				return "", false
			}
			total += cur * sc
			cur, lastScale = 0, sc
			hasHundred, hasTens, hasUnit = false, false, false
		default:
			return "", false
		}
		seen = true
		afterAnd = false
	}
	if !seen || afterAnd {
		return "", false
	}
	return strconv.FormatInt(total+cur, 10), true
}

// parseBool reads true/false and yes/no in any case; with loose (a
// boolean field) also y/n, on/off, t/f and 1/0.
func parseBool(v string, loose bool) (string, bool) {
	v = strings.TrimSpace(v)
	if len(v) > 5 {
		return "", false
	}
	for _, w := range [...]string{"true", "yes"} {
		if strings.EqualFold(v, w) {
			return "true", true
		}
	}
	for _, w := range [...]string{"false", "no"} {
		if strings.EqualFold(v, w) {
			return "false", true
		}
	}
	if !loose {
		return "", false
	}
	for _, w := range [...]string{"y", "on", "t", "1"} {
		if strings.EqualFold(v, w) {
			return "true", true
		}
	}
	for _, w := range [...]string{"n", "off", "f", "0"} {
		if strings.EqualFold(v, w) {
			return "false", true
		}
	}
	return "", false
}

// moneyForm reads an amount of money: a sign or ISO code before or after
// the amount ("$1,630", "€12.50", "USD 1250", "1250 usd", "12.50 €"), or a
// currency word after it ("980 bucks", "eight hundred and ten dollars").
// A bare amount is money only in a money field of a tool with a currency
// (typ is TypeMoney or moneyField: the field has a money name). The form is "money USD
// 1250", or for a sign several currencies share and the tool's currency
// does not settle, "money $ 1250": equal to another "$" amount, never to a
// coded one.
func (r *typedRules) moneyForm(v string, moneyField bool, typ string) string {
	s := strings.TrimSpace(v)
	cur, amount, ok := splitMoney(s)
	if !ok {
		if r.currency == "" || typ != TypeMoney && !moneyField {
			return ""
		}
		n, ok := parseDecimal(s, r.decimalComma)
		if !ok {
			return ""
		}
		return "money " + r.currency + " " + n
	}
	n, ok := parseDecimal(amount, r.decimalComma)
	if !ok {
		if n, ok = parseNumberWords(amount); !ok || !isWordCurrency(cur) {
			return ""
		}
	}
	if strings.HasPrefix(n, "-") {
		return ""
	}
	cur, _ = resolveSign(cur, r)
	return "money " + cur + " " + n
}

// currencyWords are the words after an amount that name its currency. The
// dollar and the pound name several currencies: they resolve like the
// sign.
var currencyWords = map[string]string{
	"dollars": "$", "dollar": "$", "bucks": "$", "buck": "$", "euros": "EUR", "euro": "EUR",
	"yen": "JPY", "yuan": "CNY", "pounds": "£", "pound": "£", "us dollars": "USD",
	"usd": "USD", "eur": "EUR",
}

// isWordCurrency: number words are read only with a currency word or
// code ("eight hundred dollars"), not after a sign ("$eight").
func isWordCurrency(cur string) bool { return cur != "" && cur[0] != '~' }

// splitMoney splits a currency marker from an amount. cur is an ISO code,
// a word's currency, or a sign prefixed with '~' until resolved.
func splitMoney(s string) (cur, amount string, ok bool) {
	if s == "" {
		return "", "", false
	}
	low := strings.ToLower(s)
	// A currency word or code after the amount.
	for _, w := range []string{"us dollars", "dollars", "dollar", "bucks", "buck", "euros", "euro", "yen", "yuan", "pounds", "pound"} {
		if strings.HasSuffix(low, " "+w) {
			return currencyWords[w], strings.TrimSpace(s[:len(s)-len(w)]), true
		}
	}
	if len(s) > 4 && s[len(s)-4] == ' ' {
		if code, ok := isoCurrency(s[len(s)-3:]); ok {
			return code, strings.TrimSpace(s[:len(s)-4]), true
		}
	}
	if len(s) > 4 && s[3] == ' ' {
		if code, ok := isoCurrency(s[:3]); ok {
			return code, strings.TrimSpace(s[4:]), true
		}
	}
	// A sign before or after the amount: the longest one that matches
	// (the lists are sorted longest first).
	t := symbolTables()
	for _, sign := range t.byFirst[s[0]] {
		if strings.HasPrefix(s, sign) {
			if amount = strings.TrimSpace(s[len(sign):]); amount != "" {
				return "~" + sign, amount, true
			}
		}
	}
	for _, sign := range t.byLast[s[len(s)-1]] {
		if strings.HasSuffix(s, sign) {
			if amount = strings.TrimSpace(s[:len(s)-len(sign)]); amount != "" {
				return "~" + sign, amount, true
			}
		}
	}
	return "", "", false
}

// resolveSign turns a marker into an ISO code where that is certain: a
// sign that only one currency uses, or a shared sign ("$", "£" from
// "pounds") that the tool's currency uses. Otherwise the marker stays, as
// the shared sign.
func resolveSign(cur string, r *typedRules) (string, bool) {
	sign := strings.TrimPrefix(cur, "~")
	if len(sign) == 3 && sign == strings.ToUpper(sign) && !strings.HasPrefix(cur, "~") {
		return sign, true // already a code
	}
	t := symbolTables()
	if code, ok := t.unique[sign]; ok {
		return code, true
	}
	if r.currencySign != "" && r.currencySign == sign {
		return r.currency, true
	}
	return sign, false
}

// isoCurrency reads a current ISO 4217 code, in any case.
func isoCurrency(s string) (string, bool) {
	if len(s) != 3 {
		return "", false
	}
	for i := 0; i < 3; i++ {
		if !isASCIILetter(s[i]) {
			return "", false
		}
	}
	code := strings.ToUpper(s)
	_, ok := symbolTables().codes[code]
	return code, ok
}

// lookupCurrency reads a currency field: an ISO code or a sign only one
// currency uses.
func lookupCurrency(v string) (string, bool) {
	s := strings.TrimSpace(v)
	if code, ok := isoCurrency(s); ok {
		return code, true
	}
	code, ok := symbolTables().unique[s]
	return code, ok
}

// sharedSign returns the sign of a currency that other currencies share
// ("$" for USD), which the currency settles for a tool; "" if none.
func sharedSign(code string) string {
	t := symbolTables()
	u, err := currency.ParseISO(code)
	if err != nil {
		return ""
	}
	narrow := symbolOf(currency.NarrowSymbol(u), code)
	if _, unique := t.unique[narrow]; !unique && narrow != "" {
		return narrow
	}
	return ""
}

type symbols struct {
	codes   map[string]bool            // current ISO 4217 codes
	byFirst map[byte][]string          // every sign a current currency uses, by first byte, longest first
	byLast  map[byte][]string          // the same by last byte
	unique  map[string]string          // sign → the one currency that uses it
	users   map[string]map[string]bool // sign → the currencies that use it
}

var (
	symbolsOnce sync.Once
	symbolsTab  *symbols
)

// symbolTables builds, once, the tables of current (tender) currencies
// and their CLDR English signs from golang.org/x/text/currency.
func symbolTables() *symbols {
	symbolsOnce.Do(func() {
		t := &symbols{codes: map[string]bool{}, byFirst: map[byte][]string{}, byLast: map[byte][]string{}, unique: map[string]string{}}
		users := map[string]map[string]bool{}
		for it := currency.Query(); it.Next(); {
			u := it.Unit()
			code := u.String()
			t.codes[code] = true
			for _, f := range []currency.Formatter{currency.Symbol, currency.NarrowSymbol} {
				sign := symbolOf(f(u), code)
				if sign == "" {
					continue
				}
				if users[sign] == nil {
					users[sign] = map[string]bool{}
				}
				users[sign][code] = true
			}
		}
		for sign, us := range users {
			t.byFirst[sign[0]] = append(t.byFirst[sign[0]], sign)
			t.byLast[sign[len(sign)-1]] = append(t.byLast[sign[len(sign)-1]], sign)
			if len(us) == 1 {
				for code := range us {
					t.unique[sign] = code
				}
			}
		}
		for _, m := range []map[byte][]string{t.byFirst, t.byLast} {
			for _, l := range m {
				sort.Slice(l, func(i, j int) bool { return len(l[i]) > len(l[j]) || len(l[i]) == len(l[j]) && l[i] < l[j] })
			}
		}
		t.users = users
		symbolsTab = t
	})
	return symbolsTab
}

// symbolOf is the sign a formatter writes for a currency ("US$", "€");
// one that is only the ISO code or holds a digit or a space is none.
func symbolOf(v any, code string) string {
	s := strings.TrimSpace(fmt.Sprint(v))
	if s == "" || s == code || strings.ContainsAny(s, "0123456789 \u00a0") {
		return ""
	}
	return s
}
