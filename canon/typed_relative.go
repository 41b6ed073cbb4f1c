package canon

import (
	"fmt"
	"strings"
	"time"
)

// Date is a calendar date. As the reference date of a call
// (Canonicalizer.CanonicalizeOn) it is the caller's local date when it made
// the call, which relative dates in the call ("today", "next Monday") are
// read against. The zero Date is no date.
type Date struct {
	Year  int
	Month time.Month
	Day   int
}

// DateOf is the calendar date of t in t's location.
func DateOf(t time.Time) Date {
	y, m, d := t.Date()
	return Date{y, m, d}
}

// ParseDate reads a full date, YYYY-MM-DD.
func ParseDate(s string) (Date, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return Date{}, fmt.Errorf("%q is not a date (want YYYY-MM-DD)", s)
	}
	return DateOf(t), nil
}

// ParseReference reads a caller's reference date as an API takes it: a
// full date ("2019-03-01", the caller's local date) or an RFC 3339
// date-time with its offset ("2019-03-01T21:00:00-08:00"), whose date is
// read in that offset (there, 2019-03-01; in UTC it would be March 2nd).
func ParseReference(s string) (Date, error) {
	var d Date
	if len(s) == len(time.DateOnly) {
		var err error
		if d, err = ParseDate(s); err != nil {
			return Date{}, err
		}
	} else {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return Date{}, fmt.Errorf("%q is neither a date (YYYY-MM-DD) nor an RFC 3339 date-time with an offset", s)
		}
		d = DateOf(t)
	}
	if d.Year < 1 {
		return Date{}, fmt.Errorf("%q: no year 0", s)
	}
	return d, nil
}

// IsZero reports whether d is the zero Date.
func (d Date) IsZero() bool { return d == Date{} }

// String spells d as YYYY-MM-DD.
func (d Date) String() string { return fmt.Sprintf("%04d-%02d-%02d", d.Year, d.Month, d.Day) }

// AddDays returns the date n days after d (before, for n < 0).
func (d Date) AddDays(n int) Date {
	return DateOf(time.Date(d.Year, d.Month, d.Day, 12, 0, 0, 0, time.UTC).AddDate(0, 0, n))
}

func (d Date) date() date { return date{y: d.Year, m: int(d.Month), d: d.Day} }

// String spells d as YYYY-MM-DD, or --MM-DD without a year.
func (d date) String() string {
	if d.y == 0 {
		return fmt.Sprintf("--%02d-%02d", d.m, d.d)
	}
	return Date{d.y, time.Month(d.m), d.d}.String()
}

// Today returns the calendar date of now in the tool's TypedConfig.Timezone:
// the reference date of a call checked at now by a caller who sent none.
// It is the zero Date when the tool has no Timezone (or typed comparison
// off), and relative dates then stay strings.
func (c *Canonicalizer) Today(tool string, now time.Time) Date {
	rules := c.tools[tool]
	if rules == nil {
		rules = c.deflt
	}
	if rules.typed == nil || rules.typed.loc == nil {
		return Date{}
	}
	return DateOf(now.In(rules.typed.loc))
}

// relativeWords are the words that may make a value a relative date.
var relativeWords = setOf("today", "tonight", "tomorrow", "yesterday", "next", "this", "week", "month")

// relativeDate reads a date said relative to today, the caller's date,
// where every common reading of it gives the same day:
//
//   - "today", "later today", "tonight"; "tomorrow", "the day after
//     tomorrow"; "yesterday", "the day before yesterday";
//   - "Tuesday next week", "Tuesday of next week", "next week Tuesday":
//     the day in the week after this one, where weeks starting on Monday
//     (ISO 8601) and on Sunday agree, which they do for every day but
//     Sunday;
//   - "this Saturday", "Saturday this week": the day of this week
//     (Monday to Sunday), when it is today or later; a day of this week
//     already past ("this Monday" said on a Friday) is not read;
//   - "next Tuesday": read only where "the coming Tuesday" and "Tuesday
//     of next week" are one day. Said on a Friday, "next Monday" is
//     Monday in three days either way; said on a Monday, "next Tuesday"
//     may be tomorrow or eight days on, and is not read;
//   - "the 4th of this month", "4th of next month".
//
// Anything else ("Friday" alone, "the 11th", "in two days", "next
// weekend") is refused.
func relativeDate(w []string, today date) (date, bool) {
	if today.y == 0 || len(w) == 0 || len(w) > 6 {
		return date{}, false
	}
	t := time.Date(today.y, time.Month(today.m), today.d, 12, 0, 0, 0, time.UTC)
	if w[0] == "the" {
		w = w[1:]
	}
	add := func(days int) (date, bool) {
		u := t.AddDate(0, 0, days)
		return date{u.Year(), int(u.Month()), u.Day()}, true
	}
	switch strings.Join(w, " ") {
	case "today", "later today", "tonight":
		return add(0)
	case "tomorrow":
		return add(1)
	case "day after tomorrow":
		return add(2)
	case "yesterday":
		return add(-1)
	case "day before yesterday":
		return add(-2)
	}
	// Day indexes: iso counts from Monday (0) to Sunday (6); Go's
	// Weekday counts from Sunday (0).
	iso := func(d time.Weekday) int { return (int(d) + 6) % 7 }
	now := t.Weekday()
	isoMonday := -iso(now) // days from today to this week's Monday
	sunStart := -int(now)  // … and to this week's Sunday, when weeks start on Sunday
	nextWeek := func(wd time.Weekday) (date, bool) {
		a, b := isoMonday+7+iso(wd), sunStart+7+int(wd)
		if a != b {
			return date{}, false
		}
		return add(a)
	}
	thisWeek := func(wd time.Weekday) (date, bool) {
		if k := isoMonday + iso(wd); k >= 0 {
			return add(k)
		}
		return date{}, false
	}
	if wd, ok := weekdayPhrase(w, "next week"); ok {
		return nextWeek(wd)
	}
	if wd, ok := weekdayPhrase(w, "this week"); ok {
		return thisWeek(wd)
	}
	if len(w) == 2 && (w[0] == "next" || w[0] == "this") {
		wd, ok := weekdays[w[1]]
		switch {
		case !ok:
			return date{}, false
		case w[0] == "this":
			return thisWeek(wd)
		}
		coming := (int(wd) - int(now) + 7) % 7
		if coming == 0 {
			coming = 7
		}
		d, ok := nextWeek(wd)
		if c, _ := add(coming); !ok || c != d {
			return date{}, false
		}
		return d, true
	}
	// The 4th of this month, 4th of next month.
	if n := len(w); n >= 4 && w[n-1] == "month" && w[n-3] == "of" && (w[n-2] == "this" || w[n-2] == "next") {
		day, k := dayOf(w[:n-3])
		if k == 0 || k != n-3 {
			return date{}, false
		}
		m := time.Date(today.y, time.Month(today.m), 1, 12, 0, 0, 0, time.UTC)
		if w[n-2] == "next" {
			m = m.AddDate(0, 1, 0)
		}
		d := date{m.Year(), int(m.Month()), day}
		return d, validDate(d)
	}
	return date{}, false
}

// weekdayPhrase reads "<weekday> <week>", "<weekday> of <week>" and
// "<week> <weekday>", where week is "next week" or "this week".
func weekdayPhrase(w []string, week string) (time.Weekday, bool) {
	var day string
	switch n := len(w); {
	case n == 3 && strings.Join(w[1:], " ") == week, n == 4 && w[1] == "of" && strings.Join(w[2:], " ") == week:
		day = w[0]
	case n == 3 && strings.Join(w[:2], " ") == week:
		day = w[2]
	default:
		return 0, false
	}
	wd, ok := weekdays[day]
	return wd, ok
}
