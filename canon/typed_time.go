package canon

import (
	"strconv"
	"strings"
	"time"
)

// words splits a value into lower-case words for the date and time
// parsers: commas are spaces, "a.m."/"p.m." are "am"/"pm", the quote
// variants of "o'clock" are one spelling, "7pm" and "11:30am" are two
// words. It returns nil for a value with characters no date or time
// has.
func words(v string) []string {
	b := make([]byte, 0, len(v)+4)
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c == ',' || c == ' ' || c == '\t':
			c = ' '
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == ':', c == '.', c == '-', c == '/', c == '+', c == '\'', c == '"':
		case c == 0xe2 && strings.HasPrefix(v[i:], "’"): // right single quotation mark
			c = '\''
			i += len("’") - 1
		default:
			return nil
		}
		b = append(b, c)
	}
	s := string(b)
	for _, q := range []string{`o"clock`, "oclock", "o'clock", "o clock"} {
		s = strings.ReplaceAll(s, q, " o'clock")
	}
	s = strings.ReplaceAll(s, "a.m.", " am")
	s = strings.ReplaceAll(s, "p.m.", " pm")
	f := strings.Fields(s)
	out := f[:0:0]
	for _, w := range f {
		w = strings.TrimSuffix(w, ".")
		// 7pm, 11:30am: the period as a word of its own.
		if n := len(w); n > 2 && (strings.HasSuffix(w, "am") || strings.HasSuffix(w, "pm")) && w[n-3] >= '0' && w[n-3] <= '9' {
			out = append(out, w[:n-2], w[n-2:])
			continue
		}
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

// clock is a time of day; zone is minutes east of UTC when hasZone.
type clock struct {
	h, m, s int
	frac    string // fraction of a second without the point, trailing zeros removed
	hasZone bool
	zone    int
}

// timeForm reads v as a time of day, or returns "".
func (r *typedRules) timeForm(v string) string {
	c, ok := parseTime(v)
	if !ok {
		return ""
	}
	return "time " + r.clockString(c)
}

func (r *typedRules) clockString(c clock) string {
	if c.hasZone && !r.ignoreZone {
		t := (c.h*60 + c.m - c.zone) % 1440
		if t < 0 {
			t += 1440
		}
		c.h, c.m = t/60, t%60
	}
	b := make([]byte, 0, 16)
	b = append2(b, c.h)
	b = append(b, ':')
	b = append2(b, c.m)
	if c.s != 0 || c.frac != "" {
		b = append(b, ':')
		b = append2(b, c.s)
		if c.frac != "" {
			b = append(b, '.')
			b = append(b, c.frac...)
		}
	}
	if c.hasZone && !r.ignoreZone {
		b = append(b, 'Z')
	}
	return string(b)
}

func append2(b []byte, n int) []byte {
	return append(b, byte('0'+n/10), byte('0'+n%10))
}

// Day periods and the hours (on a 12-hour clock, 0 only in the morning)
// each one fixes; an hour outside its set is not certain ("12 in the
// morning", "3 in the night") and the value stays a string.
type period uint8

const (
	noPeriod period = iota
	am
	pm
	morning
	afternoon
	evening
	night
)

var periods = map[string]period{"am": am, "pm": pm, "morning": morning, "afternoon": afternoon, "evening": evening, "night": night}

// to24 turns an hour of a 12-hour clock in a day period into 0–23.
func (p period) to24(h int) (int, bool) {
	switch p {
	case am:
		if h == 12 {
			return 0, true
		}
		return h, h >= 0 && h <= 11
	case pm:
		if h == 12 {
			return 12, true
		}
		return h + 12, h >= 1 && h <= 11
	case morning:
		return h, h >= 0 && h <= 11
	case afternoon:
		if h == 12 {
			return 12, true
		}
		return h + 12, h >= 1 && h <= 6
	case evening:
		return h + 12, h >= 4 && h <= 11
	case night:
		return h + 12, h >= 6 && h <= 11
	}
	return 0, false
}

var hourWords = map[string]int{"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
	"six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}

// parseTime reads a time of day: 24-hour "19:30", "19:30:05.250",
// "07:30+02:00", "19:30Z"; 12-hour with am/pm "7:30 pm", "7pm", "seven
// p.m."; with a day period "7:30 in the evening", "evening 7:30",
// "half past 11 in the morning", "quarter to 1 in the afternoon",
// "5 o'clock in the evening"; "noon", "midnight".
func parseTime(v string) (clock, bool) {
	w := words(v)
	switch len(w) {
	case 0:
		return clock{}, false
	case 1:
		switch w[0] {
		case "noon", "midday":
			return clock{h: 12}, true
		case "midnight":
			return clock{}, true
		}
	case 2:
		if w[0] == "12" || w[0] == "twelve" {
			switch w[1] {
			case "noon":
				return clock{h: 12}, true
			case "midnight":
				return clock{}, true
			}
		}
	}
	// The day period: a last word (am, pm), "in the …" or "at night" at
	// the end, or a first word ("evening 7:30").
	p := noPeriod
	switch n := len(w); {
	case n >= 2 && (w[n-1] == "am" || w[n-1] == "pm"):
		p, w = periods[w[n-1]], w[:n-1]
	case n >= 4 && w[n-3] == "in" && w[n-2] == "the" && periods[w[n-1]] >= morning:
		p, w = periods[w[n-1]], w[:n-3]
	case n >= 3 && w[n-2] == "at" && w[n-1] == "night":
		p, w = night, w[:n-2]
	case n >= 2 && periods[w[0]] >= morning:
		p, w = periods[w[0]], w[1:]
	}
	if len(w) > 1 && w[len(w)-1] == "o'clock" {
		w = w[:len(w)-1]
		if len(w) != 1 || strings.ContainsAny(w[0], ":.") {
			return clock{}, false
		}
	}
	// half past 11, quarter past 3, quarter to 1.
	delta := 0
	if len(w) == 3 && (w[1] == "past" || w[1] == "to") {
		switch {
		case w[0] == "half" && w[1] == "past":
			delta = 30
		case w[0] == "quarter" && w[1] == "past":
			delta = 15
		case w[0] == "quarter" && w[1] == "to":
			delta = -15
		default:
			return clock{}, false
		}
		w = w[2:]
		if strings.ContainsAny(w[0], ":.") {
			return clock{}, false
		}
	}
	if len(w) != 1 {
		return clock{}, false
	}
	c, twoDigit, ok := parseClock(w[0])
	if !ok {
		return clock{}, false
	}
	if delta != 0 {
		// Only on a 12-hour clock hour: "half past 11".
		if p == noPeriod || c.m != 0 || c.s != 0 || c.frac != "" || c.hasZone || c.h < 1 || c.h > 12 {
			return clock{}, false
		}
		if delta > 0 {
			c.m = delta
		} else {
			c.h, c.m = c.h-1, 60+delta
			if c.h == 0 {
				c.h = 12
			}
		}
	}
	if p == noPeriod {
		// A 24-hour clock must say so: two-digit hours (07:30, 19:30) or
		// hour 0. "7:30" may be either half of the day.
		if !twoDigit && c.h != 0 {
			return clock{}, false
		}
		if !strings.ContainsRune(w[0], ':') {
			return clock{}, false
		}
		return c, true
	}
	if c.hasZone || c.h > 12 {
		return clock{}, false
	}
	h, ok := p.to24(c.h)
	if !ok {
		return clock{}, false
	}
	c.h = h
	return c, true
}

// parseClock reads "19:30", "7", "07:30:15.5", "19:30Z", "19:30+02:00",
// "seven". twoDigit reports a two-digit hour.
func parseClock(s string) (c clock, twoDigit, ok bool) {
	if h, ok := hourWords[s]; ok {
		return clock{h: h}, false, true
	}
	// The zone, if any.
	switch {
	case strings.HasSuffix(s, "z"):
		s, c.hasZone = s[:len(s)-1], true
	default:
		if i := strings.LastIndexAny(s, "+-"); i > 0 {
			z, ok := parseOffset(s[i:])
			if !ok {
				return clock{}, false, false
			}
			s, c.hasZone, c.zone = s[:i], true, z
		}
	}
	hs, rest, hasColon := strings.Cut(s, ":")
	if !digits(hs) || len(hs) > 2 {
		return clock{}, false, false
	}
	c.h, _ = strconv.Atoi(hs)
	twoDigit = len(hs) == 2
	if !hasColon {
		if c.hasZone {
			return clock{}, false, false
		}
		return c, twoDigit, c.h <= 23
	}
	ms, rest, hasSec := strings.Cut(rest, ":")
	if len(ms) != 2 || !digits(ms) {
		return clock{}, false, false
	}
	c.m, _ = strconv.Atoi(ms)
	if hasSec {
		ss, frac, hasFrac := strings.Cut(rest, ".")
		if len(ss) != 2 || !digits(ss) || hasFrac && !digits(frac) {
			return clock{}, false, false
		}
		c.s, _ = strconv.Atoi(ss)
		c.frac = strings.TrimRight(frac, "0")
	}
	if c.h > 23 || c.m > 59 || c.s > 59 {
		return clock{}, false, false
	}
	return c, twoDigit, true
}

// parseOffset reads "+02:00", "-0530", "+02" as minutes east of UTC.
func parseOffset(s string) (int, bool) {
	sign := 1
	if s[0] == '-' {
		sign = -1
	}
	s = strings.Replace(s[1:], ":", "", 1)
	if !digits(s) || (len(s) != 2 && len(s) != 4) {
		return 0, false
	}
	h, _ := strconv.Atoi(s[:2])
	m := 0
	if len(s) == 4 {
		m, _ = strconv.Atoi(s[2:])
	}
	if h > 23 || m > 59 {
		return 0, false
	}
	return sign * (h*60 + m), true
}

var months = map[string]int{
	"january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
	"august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
	"jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
	"sept": 9, "oct": 10, "nov": 11, "dec": 12,
}

var weekdays = map[string]time.Weekday{
	"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday,
	"wednesday": time.Wednesday, "thursday": time.Thursday, "friday": time.Friday,
	"saturday": time.Saturday, "sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday,
	"tues": time.Tuesday, "wed": time.Wednesday, "thu": time.Thursday, "thur": time.Thursday,
	"thurs": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

var ordinalWords = map[string]int{
	"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
	"eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13,
	"fourteenth": 14, "fifteenth": 15, "sixteenth": 16, "seventeenth": 17, "eighteenth": 18,
	"nineteenth": 19, "twentieth": 20, "thirtieth": 30,
}

// date is a calendar date; y is 0 when the value has no year.
type date struct{ y, m, d int }

// dateForm reads v as a calendar date, or returns "". A relative date is
// read only against a reference date (today not zero), and then sets
// *relative when relative is not nil.
func (r *typedRules) dateForm(v string, today date, relative *bool) string {
	var d date
	var ok bool
	if len(v) == 10 && v[4] == '-' && v[7] == '-' && digits(v[:4]) && digits(v[5:7]) && digits(v[8:]) {
		// The common case, ISO 8601, without the word splitting.
		d = date{y: atoi(v[:4]), m: atoi(v[5:7]), d: atoi(v[8:])}
		ok = v[0] != '0' && validDate(d)
	} else {
		w := words(v)
		d, ok = parseDateWords(w, r.dateOrder)
		if !ok && today.y != 0 {
			if d, ok = relativeDate(w, today); ok && relative != nil {
				*relative = true
			}
		}
	}
	if !ok {
		return ""
	}
	b := make([]byte, 0, 15)
	b = append(b, "date "...)
	if d.y == 0 || r.ignoreYear {
		b = append(b, "--"...)
	} else {
		b = strconv.AppendInt(b, int64(d.y), 10)
		b = append(b, '-')
	}
	b = append2(b, d.m)
	b = append(b, '-')
	b = append2(b, d.d)
	return string(b)
}

// parseDate reads a calendar date: ISO 8601 (2019-03-01, 2019/3/1,
// --03-01), numeric day and month in the configured order (order 'm':
// 03/01/2019, 3/1; 'd': 01.03.2019), or with a month name: "March 1st",
// "Mar 1, 2019", "1 March 2019", "1st of March", "the first of March",
// "Friday, March 1, 2019" (a weekday only with a year, and it must be the
// date's). Relative dates and two-digit years are refused.
func parseDate(v string, order byte) (date, bool) { return parseDateWords(words(v), order) }

// parseDateWords is parseDate on v's words.
func parseDateWords(w []string, order byte) (date, bool) {
	if len(w) == 1 {
		return numericDate(w[0], order)
	}
	if len(w) < 2 {
		return date{}, false
	}
	wd, hasWeekday := weekdays[w[0]]
	if hasWeekday {
		w = w[1:]
	}
	var d date
	var ok bool
	// Month first: March 1st [2019]; March the 1st.
	if m, isMonth := months[w[0]]; isMonth {
		rest := w[1:]
		if len(rest) > 0 && rest[0] == "the" {
			rest = rest[1:]
		}
		day, n := dayOf(rest)
		if n == 0 {
			return date{}, false
		}
		rest = rest[n:]
		d, ok = date{m: m, d: day}, true
		if len(rest) == 1 {
			d.y, ok = yearOf(rest[0])
		} else if len(rest) > 1 {
			return date{}, false
		}
	} else {
		// Day first: [the] 1st [of] March [2019].
		rest := w
		if rest[0] == "the" {
			rest = rest[1:]
		}
		day, n := dayOf(rest)
		if n == 0 {
			return date{}, false
		}
		rest = rest[n:]
		if len(rest) > 0 && rest[0] == "of" {
			rest = rest[1:]
		}
		if len(rest) == 0 {
			return date{}, false
		}
		m, isMonth := months[rest[0]]
		if !isMonth {
			return date{}, false
		}
		rest = rest[1:]
		d, ok = date{m: m, d: day}, true
		if len(rest) == 1 {
			d.y, ok = yearOf(rest[0])
		} else if len(rest) > 1 {
			return date{}, false
		}
	}
	if !ok || !validDate(d) {
		return date{}, false
	}
	if hasWeekday && (d.y == 0 || time.Date(d.y, time.Month(d.m), d.d, 0, 0, 0, 0, time.UTC).Weekday() != wd) {
		return date{}, false
	}
	return d, true
}

// dayOf reads a day of the month at the start of w: "1", "01", "1st",
// "first", "twenty-first", "twenty first". n is how many words it took,
// 0 if none.
func dayOf(w []string) (day, n int) {
	if len(w) == 0 {
		return 0, 0
	}
	s := w[0]
	if d, ok := ordinalWords[s]; ok {
		return d, 1
	}
	for _, tens := range []struct {
		word string
		n    int
	}{{"twenty", 20}, {"thirty", 30}} {
		unit := ""
		switch {
		case strings.HasPrefix(s, tens.word+"-"):
			unit, n = s[len(tens.word)+1:], 1
		case s == tens.word && len(w) > 1:
			unit, n = w[1], 2
		default:
			continue
		}
		if u, ok := ordinalWords[unit]; ok && u <= 9 {
			return tens.n + u, n
		}
		return 0, 0
	}
	num := s
	if len(s) > 2 {
		switch suffix := s[len(s)-2:]; suffix {
		case "st", "nd", "rd", "th":
			num = s[:len(s)-2]
			if !digits(num) || len(num) > 2 || ordinalSuffix(num) != suffix {
				return 0, 0
			}
		}
	}
	if !digits(num) || len(num) > 2 {
		return 0, 0
	}
	d, _ := strconv.Atoi(num)
	return d, 1
}

// ordinalSuffix is the English suffix of a day number: 1st, 2nd, 3rd,
// 4th, 11th, 12th, 13th, 21st, 22nd, 23rd.
func ordinalSuffix(num string) string {
	d, _ := strconv.Atoi(num)
	if d%100 >= 11 && d%100 <= 13 {
		return "th"
	}
	switch d % 10 {
	case 1:
		return "st"
	case 2:
		return "nd"
	case 3:
		return "rd"
	}
	return "th"
}

// atoi reads a short string of digits.
func atoi(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}

func yearOf(s string) (int, bool) {
	if len(s) != 4 || !digits(s) || s[0] == '0' {
		return 0, false
	}
	y, _ := strconv.Atoi(s)
	return y, true
}

func validDate(d date) bool {
	if d.m < 1 || d.m > 12 || d.d < 1 {
		return false
	}
	y := d.y
	if y == 0 {
		y = 2000 // a leap year: --02-29 is a date
	}
	return d.d <= time.Date(y, time.Month(d.m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// numericDate reads 2019-03-01, 2019/3/1, 2019.03.01, --03-01, and with a
// configured order 03/01/2019, 1.3.2019, 03/01.
func numericDate(s string, order byte) (date, bool) {
	if strings.HasPrefix(s, "--") && len(s) == 7 && s[4] == '-' && digits(s[2:4]) && digits(s[5:]) {
		m, _ := strconv.Atoi(s[2:4])
		d, _ := strconv.Atoi(s[5:])
		dt := date{m: m, d: d}
		return dt, validDate(dt)
	}
	var sep byte
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '-' || c == '/' || c == '.' {
			sep = c
			break
		}
	}
	if sep == 0 {
		return date{}, false
	}
	parts := strings.Split(s, string(sep))
	for _, p := range parts {
		if !digits(p) {
			return date{}, false
		}
	}
	var d date
	switch {
	case len(parts) == 3 && len(parts[0]) == 4:
		if len(parts[1]) > 2 || len(parts[2]) > 2 {
			return date{}, false
		}
		d.y, _ = yearOf(parts[0])
		d.m, _ = strconv.Atoi(parts[1])
		d.d, _ = strconv.Atoi(parts[2])
		if d.y == 0 {
			return date{}, false
		}
	case order != 0 && (len(parts) == 3 && len(parts[2]) == 4 || len(parts) == 2 && sep == '/') && len(parts[0]) <= 2 && len(parts[1]) <= 2:
		// Without a year only with a slash: 1.5 and 12-05 are not dates.
		a, _ := strconv.Atoi(parts[0])
		b, _ := strconv.Atoi(parts[1])
		if order == 'm' {
			d.m, d.d = a, b
		} else {
			d.d, d.m = a, b
		}
		if len(parts) == 3 {
			var ok bool
			if d.y, ok = yearOf(parts[2]); !ok {
				return date{}, false
			}
		}
	default:
		return date{}, false
	}
	return d, validDate(d)
}

// dateTimeForm reads an ISO 8601 / RFC 3339 date-time:
// 2024-05-01T10:00:00Z, 2024-05-01 10:00, 2024-05-01T12:00:00.5+02:00.
// With a zone it is an instant, written in UTC; without, a wall clock.
func (r *typedRules) dateTimeForm(v string) string {
	v = strings.TrimSpace(v)
	if len(v) < 16 || v[10] != 'T' && v[10] != 't' && v[10] != ' ' {
		return ""
	}
	d, ok := numericDate(v[:10], 0)
	if !ok || len(v[:10]) != 10 {
		return ""
	}
	ts := strings.ToLower(strings.TrimSpace(v[11:]))
	if strings.HasSuffix(ts, " utc") || strings.HasSuffix(ts, " gmt") {
		ts = ts[:len(ts)-4] + "z"
	}
	c, twoDigit, ok := parseClock(ts)
	if !ok || !twoDigit || !strings.ContainsRune(ts, ':') {
		return ""
	}
	t := time.Date(d.y, time.Month(d.m), d.d, c.h, c.m, c.s, 0, time.UTC)
	zoned := c.hasZone && !r.ignoreZone
	if zoned {
		t = t.Add(-time.Duration(c.zone) * time.Minute)
	}
	b := make([]byte, 0, 40)
	b = append(b, "date-time "...)
	b = t.AppendFormat(b, "2006-01-02T15:04:05")
	if c.frac != "" {
		b = append(b, '.')
		b = append(b, c.frac...)
	}
	if zoned {
		b = append(b, 'Z')
	}
	return string(b)
}
