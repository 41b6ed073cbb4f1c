package canon

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Every typed parser gets a fuzz test: no input panics, whatever is read
// is in range, and the normal form read again is the same normal form
// (so a stored call and its replay agree).

var fuzzRules = []*typedRules{
	compileTyped(TypedConfig{}),
	compileTyped(TypedConfig{DateOrder: "mdy", Year: "ignore", Zone: "ignore", Currency: "USD", PhoneRegion: "US"}),
	compileTyped(TypedConfig{DateOrder: "dmy", DecimalComma: true, Currency: "EUR"}),
}

func FuzzTypedTime(f *testing.F) {
	for _, s := range []string{"11:30 am", "half past 11 in the morning", `5 o"clock in the evening`, "quarter to 1 in the afternoon",
		"evening 7:30", "19:30+01:00", "0:45 in the morning", "noon", "12 midnight", "7pm", "23:59:59.500Z", "7:30 p.m.", "twelve pm"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		c, ok := parseTime(v)
		if !ok {
			return
		}
		if c.h < 0 || c.h > 23 || c.m < 0 || c.m > 59 || c.s < 0 || c.s > 59 {
			t.Fatalf("%q read as %+v", v, c)
		}
		for _, r := range fuzzRules {
			form := r.timeForm(v)
			if again := r.timeForm(strings.TrimPrefix(form, "time ")); again != form {
				t.Fatalf("%q → %q → %q", v, form, again)
			}
		}
	})
}

func FuzzTypedDate(f *testing.F) {
	for _, s := range []string{"March 14th", "14th of March", "the first of March", "Friday, March 1, 2019", "2019-03-01",
		"--02-29", "03/01/2019", "1.3.2019", "3/1", "March twenty-first", "Mar. 1", "next Monday"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, order := range []byte{0, 'm', 'd'} {
			d, ok := parseDate(v, order)
			if ok && !validDate(d) {
				t.Fatalf("%q read as %+v", v, d)
			}
		}
		for _, r := range fuzzRules {
			form := r.dateForm(v, date{}, nil)
			if form == "" {
				continue
			}
			if again := r.dateForm(strings.TrimPrefix(form, "date "), date{}, nil); again != form {
				t.Fatalf("%q → %q → %q", v, form, again)
			}
		}
	})
}

// FuzzTypedRelativeDate: a relative date is read only against a
// reference date, lands within five weeks of it, and its normal form read
// again (with or without the reference) is the same form.
func FuzzTypedRelativeDate(f *testing.F) {
	for _, s := range []string{"today", "later today", "the day after tomorrow", "next Monday", "Tuesday, next week",
		"saturday this week", "this Sunday", "next sat", "the 4th of next month", "yesterday", "next week friday"} {
		f.Add(s, int64(0))
		f.Add(s, int64(400))
	}
	f.Fuzz(func(t *testing.T, v string, day int64) {
		ref := time.Date(2019, 3, 1, 12, 0, 0, 0, time.UTC).AddDate(0, 0, int(day%4000))
		today := date{ref.Year(), int(ref.Month()), ref.Day()}
		d, ok := relativeDate(words(v), today)
		if !ok {
			return
		}
		got := time.Date(d.y, time.Month(d.m), d.d, 12, 0, 0, 0, time.UTC)
		if !validDate(d) || got.Sub(ref).Abs() > 62*24*time.Hour {
			t.Fatalf("%q on %v read as %+v", v, today, d)
		}
		for _, r := range fuzzRules {
			form := r.dateForm(v, today, nil)
			if form == "" {
				t.Fatalf("%q on %v: relativeDate reads it, dateForm does not", v, today)
			}
			if again := r.dateForm(strings.TrimPrefix(form, "date "), today, nil); again != form {
				t.Fatalf("%q → %q → %q", v, form, again)
			}
		}
	})
}

func FuzzTypedDateTime(f *testing.F) {
	for _, s := range []string{"2024-05-01T12:00:00+02:00", "2024-05-01 10:00", "2024-05-01T10:00:00.250Z", "2024-05-01 10:00 UTC", "2024-12-31T23:30:00-01:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, r := range fuzzRules {
			form := r.dateTimeForm(v)
			if form == "" {
				continue
			}
			if again := r.dateTimeForm(strings.TrimPrefix(form, "date-time ")); again != form {
				t.Fatalf("%q → %q → %q", v, form, again)
			}
		}
	})
}

func FuzzTypedNumber(f *testing.F) {
	for _, s := range []string{"1,250.50", "-3", "+7", "0.5", "007", "1.250,5", "two", "twenty one", "one thousand six hundred and twenty", "a hundred", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, comma := range []bool{false, true} {
			n, ok := parseDecimal(v, comma)
			if !ok {
				continue
			}
			if !json.Valid([]byte(n)) {
				t.Fatalf("%q read as %q, not a JSON number", v, n)
			}
			if c, err := canonicalNumber([]byte(n)); err != nil || c != n {
				t.Fatalf("%q read as %q, not canonical (%q, %v)", v, n, c, err)
			}
		}
		if n, ok := parseNumberWords(v); ok && (!digits(n) || len(n) > 1 && n[0] == '0') {
			t.Fatalf("%q read as %q", v, n)
		}
	})
}

func FuzzTypedMoney(f *testing.F) {
	for _, s := range []string{"$1,630", "1,740 dollars", "eight hundred and ten dollars", "USD 1250", "1250 usd", "€12.50", "12,50 €", "US$ 5", "¥500", "CA$3", "5 pounds"} {
		f.Add(s, "amount")
	}
	f.Fuzz(func(t *testing.T, v, name string) {
		for _, r := range fuzzRules {
			form := r.moneyForm(v, moneyName(name), "")
			if form == "" {
				continue
			}
			parts := strings.Split(form, " ")
			if len(parts) != 3 || parts[0] != "money" || parts[1] == "" {
				t.Fatalf("%q → %q", v, form)
			}
			if c, err := canonicalNumber([]byte(parts[2])); err != nil || c != parts[2] || strings.HasPrefix(c, "-") {
				t.Fatalf("%q → %q: amount not canonical", v, form)
			}
		}
	})
}

func FuzzTypedEmailURLPhone(f *testing.F) {
	for _, s := range []string{"Bob@Example.COM", "Bob <bob@example.com>", "mailto:a@b.co", "HTTP://Example.COM:80/a/./b/../c/%7euser",
		"https://x.io/?a=1#f", "ftp://u:p@h:21/", "+1 (415) 555-0100", "tel:+44 20 7946 0958", "(415) 555-0100"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if e, ok := parseEmail(v); ok {
			if again, ok := parseEmail(e); !ok || again != e {
				t.Fatalf("email %q → %q → %q", v, e, again)
			}
		}
		if u, ok := parseURL(v); ok {
			if again, ok := parseURL(u); !ok || again != u {
				t.Fatalf("url %q → %q → %q", v, u, again)
			}
		}
		for _, nanp := range []bool{false, true} {
			if p, ok := parsePhone(v, nanp); ok {
				if !strings.HasPrefix(p, "+") || !digits(p[1:]) {
					t.Fatalf("phone %q → %q", v, p)
				}
				if again, ok := parsePhone(p, nanp); !ok || again != p {
					t.Fatalf("phone %q → %q → %q", v, p, again)
				}
			}
		}
		lookupCountry(v)
		lookupUSState(v)
		lookupCurrency(v)
	})
}

// FuzzTypedDetect runs every parser through the value-shape dispatch, as
// Canonicalize does, under each rule set: nothing panics, and a form read
// from a value is read the same way every time.
func FuzzTypedDetect(f *testing.F) {
	for _, s := range []string{"11:30 am", "March 14th", "$1,630", "two", "yes", "a@b.co", "https://x.io", "+14155550100", "mia_li_3668", "HAT136", "123 Elm Street"} {
		f.Add(s, "amount")
		f.Add(s, "phone")
	}
	f.Add("next Friday", "check_in_date")
	f.Add("tomorrow", "day")
	f.Fuzz(func(t *testing.T, v, name string) {
		li := leafInfo{name: name, today: date{2019, 3, 1}}
		for _, r := range fuzzRules {
			a, b := r.detect(v, li, nil), r.detect(v, li, nil)
			if a != b {
				t.Fatalf("%q read as %q, then %q", v, a, b)
			}
		}
	})
}

// FuzzParseReference: a reference date read from any input is a real
// date, and its spelling reads back as the same date.
func FuzzParseReference(f *testing.F) {
	for _, s := range []string{"2019-03-01", "2019-03-01T21:00:00-08:00", "2019-03-01T23:30:00.5+14:00", "2019-02-29", "next Friday", "2019-03-01T21:00:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseReference(s)
		if err != nil {
			return
		}
		if !validDate(d.date()) || d.Year < 1 || d.Year > 9999 {
			t.Fatalf("%q read as %+v", s, d)
		}
		again, err := ParseDate(d.String())
		if err != nil || again != d {
			t.Fatalf("%q → %v → %v, %v", s, d, again, err)
		}
	})
}
