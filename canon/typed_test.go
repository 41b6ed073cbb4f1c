package canon

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// typedCase: two spellings of one field's value (JSON values), and whether
// the identity gate must find them equal. The surface spellings marked
// SGD are taken from the SGD derived records (public data, upstream/sgd; the
// user's or the system's words, against the executed canonical value).
type typedCase struct {
	name  string
	field string
	a, b  string // JSON values
	equal bool
	typed string // Field.Typed of a, when equal (empty: not checked)
}

func runTypedCases(t *testing.T, cfg Config, tool string, cases []typedCase) {
	t.Helper()
	c := mustNew(t, cfg)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := mustCanon(t, c, tool, `{"`+tc.field+`":`+tc.a+`}`)
			y := mustCanon(t, c, tool, `{"`+tc.field+`":`+tc.b+`}`)
			if got := x.IdentityDigest == y.IdentityDigest; got != tc.equal {
				t.Errorf("%s vs %s: equal = %v, want %v (typed %q / %q)", tc.a, tc.b, got, tc.equal, x.Fields[0].Typed, y.Fields[0].Typed)
			}
			if tc.typed != "" && x.Fields[0].Typed != tc.typed {
				t.Errorf("%s: typed %q, want %q", tc.a, x.Fields[0].Typed, tc.typed)
			}
			if tc.a != tc.b && x.Hash == y.Hash {
				t.Error("typed comparison changed the exact hash")
			}
		})
	}
}

func q(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestTypedTimes(t *testing.T) {
	cases := []typedCase{
		// SGD: the user's and the system's words against the executed value.
		{"SGD 11:30 am", "time", q("11:30 am"), q("11:30"), true, "time 11:30"},
		{"SGD half past 11 in the morning", "time", q("half past 11 in the morning"), q("11:30"), true, "time 11:30"},
		{"SGD twelve in the afternoon", "time", q("twelve in the afternoon"), q("12:00"), true, ""},
		{"SGD half past 6 in the evening", "time", q("half past 6 in the evening"), q("18:30"), true, ""},
		{"SGD evening 5:30", "time", q("evening 5:30"), q("17:30"), true, "time 17:30"},
		{"SGD six pm", "time", q("six pm"), q("18:00"), true, ""},
		{"SGD 7 pm", "time", q("7 pm"), q("19:00"), true, ""},
		{"SGD 5 o\"clock in the evening", "time", q(`5 o"clock in the evening`), q("17:00"), true, ""},
		{"SGD twelve pm", "time", q("twelve pm"), q("12:00"), true, ""},
		{"SGD morning 11:15", "time", q("morning 11:15"), q("11:15"), true, ""},
		{"SGD afternoon 12", "time", q("afternoon 12"), q("12:00"), true, ""},
		{"SGD Eleven in the morning", "time", q("Eleven in the morning"), q("11:00"), true, ""},
		{"SGD quarter to 1 in the afternoon", "time", q("quarter to 1 in the afternoon"), q("12:45"), true, ""},
		{"SGD quarter to 12 in the morning", "time", q("quarter to 12 in the morning"), q("11:45"), true, ""},
		{"SGD quarter past 10 in the night", "time", q("quarter past 10 in the night"), q("22:15"), true, ""},
		{"SGD 8 in the night", "time", q("8 in the night"), q("20:00"), true, ""},
		{"SGD 0:45 in the morning", "time", q("0:45 in the morning"), q("00:45"), true, ""},
		{"SGD 3 o\"clock in the morning", "time", q(`3 o"clock in the morning`), q("03:00"), true, ""},
		{"SGD 10:10 AM", "leaving_time", q("10:10 AM"), q("10:10"), true, ""},
		{"SGD 9:30 pm", "event_time", q("9:30 pm"), q("21:30"), true, ""},
		{"issue evening 7:30", "time", q("evening 7:30"), q("19:30"), true, "time 19:30"},
		{"p.m. with periods", "time", q("7:30 p.m."), q("19:30"), true, ""},
		{"7pm without a space", "time", q("7pm"), q("19:00:00"), true, ""},
		{"noon", "time", q("noon"), q("12:00"), true, ""},
		{"midnight", "time", q("midnight"), q("00:00"), true, ""},
		{"12 am is midnight", "time", q("12 am"), q("00:00"), true, ""},
		{"zones as instants", "time", q("19:30+01:00"), q("18:30Z"), true, "time 18:30Z"},
		// Traps.
		{"trap: a correction of one hour", "time", q("evening 7:30"), q("20:30"), false, ""},
		{"trap: SGD 7:15 in the morning vs the 07:00 bus", "departure_time", q("7:15 in the morning"), q("07:00"), false, ""},
		{"trap: SGD evening 4:45 vs 17:00", "appointment_time", q("evening 4:45"), q("17:00"), false, ""},
		{"trap: am is not pm", "time", q("7:30 am"), q("19:30"), false, ""},
		{"trap: 12 pm is noon, not midnight", "time", q("12 pm"), q("00:00"), false, ""},
		{"trap: 7:30 has no half of the day", "time", q("7:30"), q("07:30"), false, ""},
		{"trap: 7:30 is not 19:30 either", "time", q("7:30"), q("19:30"), false, ""},
		{"trap: 12 in the morning is not certain", "time", q("12 in the morning"), q("00:00"), false, ""},
		{"trap: 3 in the night is not certain", "time", q("3 in the night"), q("03:00"), false, ""},
		{"trap: a zone is not the wall clock", "time", q("19:30Z"), q("19:30"), false, ""},
		{"trap: half past without a period", "time", q("half past 6"), q("06:30"), false, ""},
	}
	runTypedCases(t, DefaultConfig(), "t", cases)

	// Zone "ignore": wall clocks, zones dropped.
	cfg := DefaultConfig()
	cfg.Typed.Zone = "ignore"
	runTypedCases(t, cfg, "t", []typedCase{
		{"zone ignored", "time", q("19:30Z"), q("19:30"), true, "time 19:30"},
		{"zone ignored, wall clock kept", "time", q("19:30+01:00"), q("18:30Z"), false, ""},
	})
}

func TestTypedDates(t *testing.T) {
	strict := []typedCase{
		{"SGD March 14th vs 14th of March", "date", q("March 14th"), q("14th of March"), true, "date --03-14"},
		{"SGD 1st of March vs March 1st", "pickup_date", q("1st of March"), q("March 1st"), true, ""},
		{"SGD march 2nd lower case", "date", q("march 2nd"), q("March 2nd"), true, ""},
		{"the first of March", "date", q("the first of March"), q("March 1"), true, ""},
		{"twenty-first", "date", q("March twenty-first"), q("21 March"), true, ""},
		{"year spelled out", "date", q("March 1st, 2019"), q("2019-03-01"), true, "date 2019-03-01"},
		{"day first with a year", "date", q("1 March 2019"), q("2019/3/1"), true, ""},
		{"weekday that fits", "date", q("Friday, March 1, 2019"), q("2019-03-01"), true, ""},
		{"ISO partial", "date", q("--03-14"), q("March 14th"), true, ""},
		{"abbreviated month", "date", q("Mar. 14"), q("March 14th"), true, ""},
		// Partial values are distinct by default.
		{"year missing: distinct by default", "date", q("March 14th"), q("2019-03-14"), false, ""},
		// Traps.
		{"trap: a different day", "date", q("March 14th"), q("March 13th"), false, ""},
		{"trap: another year", "date", q("2019-03-14"), q("2020-03-14"), false, ""},
		{"trap: numeric dates without a configured order", "date", q("03/01/2019"), q("2019-03-01"), false, ""},
		{"trap: a weekday that does not fit", "date", q("Thursday, March 1, 2019"), q("2019-03-01"), false, ""},
		{"trap: no such day", "date", q("February 30th"), q("March 2nd"), false, ""},
		{"trap: a wrong ordinal", "date", q("March 1th"), q("March 1st"), false, ""},
		{"trap: two-digit years", "date", q("March 1, 19"), q("2019-03-01"), false, ""},
	}
	runTypedCases(t, DefaultConfig(), "t", strict)

	// Relative dates stay strings without a reference date: nothing in
	// the call says which day they were said on (TestRelativeDates reads
	// them with one).
	c := mustNew(t, DefaultConfig())
	for _, v := range []string{"today", "tomorrow", "day after tomorrow", "next Monday", "this Sunday", "the 11th", "4th of this month", "Tuesday next week", "Later today"} {
		call := mustCanon(t, c, "t", `{"date":`+q(v)+`}`)
		if call.Fields[0].Typed != "" {
			t.Errorf("relative date %q read as %q", v, call.Fields[0].Typed)
		}
	}

	year := DefaultConfig()
	year.Typed.Year = "ignore"
	runTypedCases(t, year, "t", []typedCase{
		{"SGD March 14th = 2019-03-14 (year ignore)", "appointment_date", q("March 14th"), q("2019-03-14"), true, "date --03-14"},
		{"SGD 13th of March = 2019-03-13", "date", q("13th of March"), q("2019-03-13"), true, ""},
		{"SGD 3rd of March = 2019-03-03", "departure_date", q("3rd of March"), q("2019-03-03"), true, ""},
		{"trap: a different day (year ignore)", "date", q("March 14th"), q("2019-03-13"), false, ""},
	})

	mdy := DefaultConfig()
	mdy.Typed.DateOrder = "mdy"
	runTypedCases(t, mdy, "t", []typedCase{
		{"month first", "date", q("03/01/2019"), q("2019-03-01"), true, "date 2019-03-01"},
		{"trap: swapped day and month", "date", q("03/01/2019"), q("2019-01-03"), false, ""},
		{"trap: a decimal is no date", "date", q("1.5"), q("--01-05"), false, ""},
	})
	dmy := DefaultConfig()
	dmy.Typed.DateOrder = "dmy"
	runTypedCases(t, dmy, "t", []typedCase{
		{"day first", "date", q("01.03.2019"), q("2019-03-01"), true, ""},
		{"trap: swapped day and month (dmy)", "date", q("03/01/2019"), q("2019-03-01"), false, ""},
	})
}

// TestRelativeDates reads relative dates against a reference date. The
// day is SGD's: every relative date in its dialogues names the date it
// would on Friday 2019-03-01 ("today" 2019-03-01, "next Monday"
// 2019-03-04, "Tuesday next week" 2019-03-05; see TestSGDRelativeDates).
func TestRelativeDates(t *testing.T) {
	friday := Date{2019, time.March, 1}
	cfg := DefaultConfig()
	cfg.Typed.Year = "ignore"
	c := mustNew(t, cfg)
	strict := mustNew(t, DefaultConfig())
	cases := []struct {
		said, field string
		want        string // the date it names; "" when it must not be read
	}{
		// The system's and the users' words in SGD against the executed value.
		{"today", "date", "2019-03-01"},
		{"later today", "date", "2019-03-01"},
		{"tomorrow", "check_in_date", "2019-03-02"},
		{"day after tomorrow", "pickup_date", "2019-03-03"},
		{"the day after tomorrow", "date", "2019-03-03"},
		{"next Friday", "date", "2019-03-08"},
		{"next monday", "departure_date", "2019-03-04"},
		{"next Thursday", "date", "2019-03-07"},
		{"Tuesday next week", "date", "2019-03-05"},
		{"thursday, next week", "date", "2019-03-07"},
		{"this saturday", "date", "2019-03-02"},
		{"sunday this week", "date", "2019-03-03"},
		{"the 4th of this month", "date", "2019-03-04"},
		{"2nd of next month", "date", "2019-04-02"},
		{"yesterday", "date", "2019-02-28"},
		// Not certain: refused.
		{"next Saturday", "date", ""}, // tomorrow, or Saturday of next week
		{"next Sunday", "date", ""},
		{"this Monday", "date", ""},      // already past on a Friday, or the coming one
		{"Sunday next week", "date", ""}, // weeks starting on Sunday or on Monday disagree
		{"Friday", "date", ""},           // this one or the next
		{"the 11th", "date", ""},         // this month's if still to come? next month's?
		{"next weekend", "date", ""},
		{"31st of next month", "date", ""}, // April has 30 days
		{"today", "restaurant_name", ""},   // found by shape only in a date field
		{"Tuesday next week", "title", ""},
	}
	for _, tc := range cases {
		args := `{"` + tc.field + `":` + q(tc.said) + `}`
		call, err := c.CanonicalizeOn("t", []byte(args), friday)
		if err != nil {
			t.Fatal(err)
		}
		got := call.Fields[0].Typed
		if call.Relative != (tc.want != "") {
			t.Errorf("%q: Relative = %v", tc.said, call.Relative)
		}
		if tc.want == "" {
			if got != "" {
				t.Errorf("%q on Friday 2019-03-01 read as %q, want it left a string", tc.said, got)
			}
			continue
		}
		exec := mustCanon(t, c, "t", `{"`+tc.field+`":`+q(tc.want)+`}`)
		if call.IdentityDigest != exec.IdentityDigest {
			t.Errorf("%q on Friday 2019-03-01: typed %q, want the date %s", tc.said, got, tc.want)
		}
		// Another day, another date: the same words said five weeks
		// later (a Friday again) are not the call made on March 1st.
		later, err := c.CanonicalizeOn("t", []byte(args), Date{2019, time.April, 5})
		if err != nil {
			t.Fatal(err)
		}
		if later.IdentityDigest == call.IdentityDigest {
			t.Errorf("%q said on March 1st and on April 5th compare equal", tc.said)
		}
		// Without a reference date, and under the strict year rule
		// with one, the value keeps its year: "tomorrow" is 2019-03-02.
		if plain := mustCanon(t, c, "t", args); plain.Fields[0].Typed != "" || plain.Relative {
			t.Errorf("%q read as %q without a reference date", tc.said, plain.Fields[0].Typed)
		}
		s, _ := strict.CanonicalizeOn("t", []byte(args), friday)
		if want := "date " + tc.want; s.Fields[0].Typed != want {
			t.Errorf("%q under year distinct: %q, want %q", tc.said, s.Fields[0].Typed, want)
		}
	}
	// Said on a Monday, "next Tuesday" is tomorrow or the Tuesday after.
	monday := Date{2019, time.March, 4}
	for said, want := range map[string]string{"next Tuesday": "", "next Monday": "date 2019-03-11", "this Sunday": "date 2019-03-10", "Sunday this week": "date 2019-03-10", "this Friday": "date 2019-03-08"} {
		call, err := strict.CanonicalizeOn("t", []byte(`{"date":`+q(said)+`}`), monday)
		if err != nil {
			t.Fatal(err)
		}
		if call.Fields[0].Typed != want {
			t.Errorf("%q said on Monday 2019-03-04: %q, want %q", said, call.Fields[0].Typed, want)
		}
	}
	// A schema's date format reads them whatever the field's name.
	sch := DefaultConfig()
	sch.Tools = map[string]ToolConfig{"book": {Schema: json.RawMessage(`{"type":"object","properties":{"on":{"type":"string","format":"date"}}}`)}}
	call, err := mustNew(t, sch).CanonicalizeOn("book", []byte(`{"on":"tomorrow"}`), friday)
	if err != nil || call.Fields[0].Typed != "date 2019-03-02" {
		t.Errorf("schema format date: %v, %q; want date 2019-03-02", err, call.Fields[0].Typed)
	}
}

// TestToday: a tool's Timezone gives the reference date of a call that
// carries none, in that zone; without one, none.
func TestToday(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Typed.Timezone = "America/Los_Angeles"
	cfg.Tools = map[string]ToolConfig{"tokyo": {Typed: &TypedConfig{Timezone: "Asia/Tokyo"}}, "none": {Typed: &TypedConfig{}}}
	c := mustNew(t, cfg)
	now := time.Date(2019, 3, 2, 5, 0, 0, 0, time.UTC) // 21:00 on March 1 in Los Angeles, 14:00 on March 2 in Tokyo
	for tool, want := range map[string]Date{"any": {2019, time.March, 1}, "tokyo": {2019, time.March, 2}, "none": {}} {
		if got := c.Today(tool, now); got != want {
			t.Errorf("Today(%q) = %v, want %v", tool, got, want)
		}
	}
	if _, err := ParseDate("2019-02-30"); err == nil {
		t.Error("ParseDate accepted February 30th")
	}
	if d, err := ParseDate("2019-03-01"); err != nil || d != (Date{2019, time.March, 1}) || d.String() != "2019-03-01" {
		t.Errorf("ParseDate(2019-03-01) = %v, %v", d, err)
	}
}

func TestTypedDateTimes(t *testing.T) {
	runTypedCases(t, DefaultConfig(), "t", []typedCase{
		{"one instant in two zones", "at", q("2024-05-01T12:00:00+02:00"), q("2024-05-01T10:00:00Z"), true, "date-time 2024-05-01T10:00:00Z"},
		{"space and seconds", "at", q("2024-05-01 10:00"), q("2024-05-01T10:00:00"), true, ""},
		{"UTC word", "at", q("2024-05-01 10:00 UTC"), q("2024-05-01T10:00:00Z"), true, ""},
		{"trap: an hour later", "at", q("2024-05-01T11:00:00Z"), q("2024-05-01T10:00:00Z"), false, ""},
		{"trap: no zone is not UTC", "at", q("2024-05-01T10:00:00"), q("2024-05-01T10:00:00Z"), false, ""},
	})
}

func TestTypedMoneyAndNumbers(t *testing.T) {
	usd := DefaultConfig()
	usd.Typed.Currency = "USD"
	runTypedCases(t, usd, "t", []typedCase{
		{"SGD $1,630 = 1630", "amount", q("$1,630"), q("1630"), true, "money USD 1630"},
		{"SGD 1,740 dollars", "amount", q("1,740 dollars"), q("1740"), true, ""},
		{"SGD 980 bucks", "amount", q("980 bucks"), q("980"), true, ""},
		{"SGD eight hundred and ten dollars", "amount", q("eight hundred and ten dollars"), q("810"), true, "money USD 810"},
		{"SGD one thousand six hundred and twenty bucks", "transfer_amount", q("one thousand six hundred and twenty bucks"), q("1620"), true, ""},
		{"issue $1,250.00 = 1250 USD", "amount", q("$1,250.00"), q("1250 USD"), true, ""},
		{"a JSON number in a money field", "amount", `1250`, q("USD 1,250"), true, ""},
		{"trap: another amount", "amount", q("$1,630"), q("1640"), false, ""},
		{"trap: a different currency", "amount", q("1250 USD"), q("1250 EUR"), false, ""},
		{"trap: dollars are not euros", "amount", q("$1,250"), q("€1,250"), false, ""},
		{"trap: cents matter", "amount", q("$12.50"), q("$12.05"), false, ""},
	})
	// Without a currency, "$" is some dollar: equal to "dollars", not to USD.
	runTypedCases(t, DefaultConfig(), "t", []typedCase{
		{"same unknown dollar", "amount", q("$1,630"), q("1,630 dollars"), true, "money $ 1630"},
		{"euro sign is EUR", "price", q("€12.50"), q("EUR 12.5"), true, "money EUR 12.5"},
		{"minor units written or not", "price", q("USD 12.5"), q("12.50 usd"), true, ""},
		{"trap: $ is not USD without a configured currency", "amount", q("$5"), q("USD 5"), false, ""},
		{"trap: bare amount without a currency", "amount", q("$1,630"), q("1630"), false, ""},
		{"trap: yen sign is JPY or CNY", "amount", q("¥500"), q("JPY 500"), false, ""},
	})
	runTypedCases(t, DefaultConfig(), "t", []typedCase{
		{"SGD three nights", "number_of_days", q("three"), q("3"), true, "number 3"},
		{"SGD Twelve", "stay_length", q("Twelve"), q("12"), true, ""},
		{"twenty one", "number_of_seats", q("twenty one"), `21`, true, ""},
		{"issue \"2\" = 2", "quantity", q("2"), `2`, true, "number 2"},
		{"issue two = 2", "quantity", q("two"), `2`, true, ""},
		{"thousands separators", "count", q("1,250"), `1250`, true, ""},
		{"decimal spellings", "ratio", q("0.50"), `0.5`, true, ""},
		{"trap: three is not four", "number_of_days", q("three"), q("4"), false, ""},
		{"trap: a name is not a number", "restaurant_name", q("Seven"), q("7"), false, ""},
		{"trap: leading zeros are codes", "zip", q("02134"), `2134`, false, ""},
		{"trap: bad grouping", "count", q("1,25"), `125`, false, ""},
		{"trap: one two is no number", "count", q("one two"), `12`, false, ""},
	})
	comma := DefaultConfig()
	comma.Typed.DecimalComma = true
	runTypedCases(t, comma, "t", []typedCase{
		{"decimal comma", "ratio", q("1.250,5"), `1250.5`, true, ""},
		{"trap: decimal comma is not grouping", "ratio", q("1,250"), `1250`, false, ""},
	})
}

func TestTypedBooleansEmailsURLsPhones(t *testing.T) {
	schema := `{"type":"object","properties":{"flag":{"type":"boolean"},"cabin":{"type":"string","enum":["economy","business"]},
		"site":{"type":"string","format":"uri"},"mail":{"type":"string","format":"email"}}}`
	cfg := DefaultConfig()
	cfg.Tools = map[string]ToolConfig{"t": {Schema: json.RawMessage(schema)}}
	runTypedCases(t, cfg, "t", []typedCase{
		{"SGD True = true", "shared_ride", q("True"), `true`, true, "bool true"},
		{"yes = true", "refundable", q("yes"), `true`, true, ""},
		{"schema boolean reads 1", "flag", q("1"), `true`, true, ""},
		{"trap: False is not true", "shared_ride", q("False"), `true`, false, ""},
		{"trap: 1 is a number without a boolean schema", "shared_ride", q("1"), `true`, false, ""},
		{"enum member in another case", "cabin", q("Economy"), q("economy"), true, "enum economy"},
		{"trap: another enum member", "cabin", q("Business"), q("economy"), false, ""},
		{"email domain folds", "to", q("Bob@Example.COM"), q("Bob@example.com"), true, "email Bob@example.com"},
		{"mailto and display name", "mail", q("Bob <bob@example.com>"), q("mailto:bob@EXAMPLE.com"), true, ""},
		{"trap: the local part keeps its case", "to", q("bob@example.com"), q("Bob@example.com"), false, ""},
		{"trap: another domain", "to", q("bob@example.com"), q("bob@example.org"), false, ""},
		{"URL: RFC 3986 normalization", "site", q("HTTP://Example.COM:80/a/./b/../c/%7euser"), q("http://example.com/a/c/~user"), true, "url http://example.com/a/c/~user"},
		{"URL: empty path", "url", q("https://example.com"), q("https://example.com/"), true, ""},
		{"URL: percent case", "url", q("https://example.com/a%2fb"), q("https://example.com/a%2Fb"), true, ""},
		{"trap: query order is kept", "url", q("https://x.io/?a=1&b=2"), q("https://x.io/?b=2&a=1"), false, ""},
		{"trap: an encoded slash is not a slash", "url", q("https://example.com/a%2Fb"), q("https://example.com/a/b"), false, ""},
		{"trap: path case matters", "url", q("https://example.com/A"), q("https://example.com/a"), false, ""},
		{"phone E.164", "to", q("+1 (415) 555-0100"), q("+14155550100"), true, "phone +14155550100"},
		{"phone with tel:", "phone", q("tel:+44 20 7946 0958"), q("+442079460958"), true, ""},
		{"trap: another number", "phone", q("+1 415 555 0100"), q("+14155550101"), false, ""},
		{"trap: national form without a region", "phone", q("(415) 555-0100"), q("+14155550100"), false, ""},
	})
	us := DefaultConfig()
	us.Typed.PhoneRegion = "US"
	runTypedCases(t, us, "t", []typedCase{
		{"national form with region US", "phone", q("(415) 555-0100"), q("+1 415-555-0100"), true, "phone +14155550100"},
		{"trunk 1", "mobile", q("1-415-555-0100"), q("+14155550100"), true, ""},
		{"trap: national digits outside a phone field", "order_id", q("4155550100"), q("+14155550100"), false, ""},
	})
}

func TestTypedAliases(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Tools = map[string]ToolConfig{"book": {
		Typed: &TypedConfig{Aliases: map[string]string{"NY": "New York", "NYC": "New York"}},
		Fields: map[string]FieldRule{
			"city":    {Aliases: map[string]string{"SF": "San Francisco", "SFO": "San Francisco", "San Fran": "San Francisco"}},
			"country": {Type: TypeCountry},
			"state":   {Type: TypeUSState},
			"cur":     {Type: TypeCurrency},
			"code":    {Type: TypeString},
		},
	}}
	runTypedCases(t, cfg, "book", []typedCase{
		{"SGD NY = New York (tool table)", "city_of_event", q("NY"), q("New York"), true, "alias new york"},
		{"SGD NYC = New York", "location", q("nyc"), q("New York"), true, ""},
		{"SGD SFO = San Francisco (field table)", "city", q("SFO"), q("San Francisco"), true, "alias san francisco"},
		{"SGD San Fran", "city", q("San Fran"), q("SF"), true, ""},
		{"trap: NY is not New Jersey", "city", q("NY"), q("New Jersey"), false, ""},
		{"trap: a field table is only for its field", "destination", q("SF"), q("San Francisco"), false, ""},
		{"ISO 3166 code and name", "country", q("us"), q("United States"), true, "country US"},
		{"ISO 3166 alpha-3", "country", q("DEU"), q("Germany"), true, ""},
		{"UK is GB", "country", q("UK"), q("United Kingdom"), true, ""},
		{"trap: Georgia is GE, GA is Gabon", "country", q("Georgia"), q("GA"), false, ""},
		{"USPS state", "state", q("ga"), q("Georgia"), true, "us-state GA"},
		{"trap: Washington is not DC", "state", q("Washington"), q("DC"), false, ""},
		{"ISO 4217 code", "cur", q("usd"), q("USD"), true, "currency USD"},
		{"euro sign", "cur", q("€"), q("EUR"), true, ""},
		{"type string switches typing off", "code", q("2"), `2`, false, ""},
	})
}

func TestTypedSwitchAndDigests(t *testing.T) {
	off := DefaultConfig()
	off.Tools = map[string]ToolConfig{"t": {Typed: &TypedConfig{Off: true}}}
	c := mustNew(t, off)
	a := mustCanon(t, c, "t", `{"time":"11:30 am"}`)
	b := mustCanon(t, c, "t", `{"time":"11:30"}`)
	if a.IdentityDigest == b.IdentityDigest || a.Fields[0].Typed != "" {
		t.Error("typed comparison switched off for the tool still read the time")
	}
	// Another tool keeps the default (on).
	if x, y := mustCanon(t, c, "u", `{"time":"11:30 am"}`), mustCanon(t, c, "u", `{"time":"11:30"}`); x.IdentityDigest != y.IdentityDigest {
		t.Error("a tool without config lost the default typed comparison")
	}
	globalOff := DefaultConfig()
	globalOff.Typed.Off = true
	if x, y := mustCanon(t, mustNew(t, globalOff), "u", `{"time":"11:30 am"}`), mustCanon(t, mustNew(t, globalOff), "u", `{"time":"11:30"}`); x.IdentityDigest == y.IdentityDigest {
		t.Error("Config.Typed.Off did not switch typed comparison off")
	}

	d := mustNew(t, DefaultConfig())
	base := mustCanon(t, d, "book", `{"city":"San Francisco","time":"19:30","seats":2}`)
	cases := []struct {
		name                    string
		args                    string
		sameIdentity, sameTyped bool
		unparsed                []string
	}{
		{"restated typed value", `{"city":"San Francisco","time":"evening 7:30","seats":"two"}`, true, true, []string{"city"}},
		{"differs only in an unparsed string", `{"city":"SF","time":"19:30","seats":2}`, false, true, []string{"city"}},
		{"differs in a typed value", `{"city":"SF","time":"20:30","seats":2}`, false, false, []string{"city"}},
		{"an unparsed value that became typed", `{"city":"2","time":"19:30","seats":2}`, false, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			call := mustCanon(t, d, "book", tc.args)
			if got := call.IdentityDigest == base.IdentityDigest; got != tc.sameIdentity {
				t.Errorf("same identity digest = %v, want %v", got, tc.sameIdentity)
			}
			if got := call.TypedDigest == base.TypedDigest; got != tc.sameTyped {
				t.Errorf("same typed digest = %v, want %v", got, tc.sameTyped)
			}
			if got := call.UnparsedPaths(); fmt.Sprint(got) != fmt.Sprint(tc.unparsed) {
				t.Errorf("unparsed paths %v, want %v", got, tc.unparsed)
			}
		})
	}
	restated := mustCanon(t, d, "book", `{"city":"San Francisco","time":"evening 7:30","seats":"two"}`)
	got := strings.Join(TypedEqualities(restated, base), "\n")
	want := "seats: number \"two\" = 2\ntime: time \"evening 7:30\" = \"19:30\""
	if got != want {
		t.Errorf("TypedEqualities:\n%s\nwant:\n%s", got, want)
	}
}

func TestTypedConfigValidation(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.Typed.DateOrder = "ymd" },
		func(c *Config) { c.Typed.Year = "nearest" },
		func(c *Config) { c.Typed.Zone = "UTC" },
		func(c *Config) { c.Typed.Currency = "usd" },
		func(c *Config) { c.Typed.Currency = "XYZ" },
		func(c *Config) { c.Typed.PhoneRegion = "DE" },
		func(c *Config) { c.Typed.Timezone = "Mars/Olympus_Mons" },
		func(c *Config) { c.Typed.Timezone = "Local" },
		func(c *Config) { c.Typed.Aliases = map[string]string{"": "x"} },
		func(c *Config) { c.Typed.Aliases = map[string]string{"ny": "New York", "NY": "Newark"} },
		func(c *Config) { c.Tools = map[string]ToolConfig{"t": {Typed: &TypedConfig{Year: "x"}}} },
		func(c *Config) {
			c.Tools = map[string]ToolConfig{"t": {Fields: map[string]FieldRule{"a": {Type: "colour"}}}}
		},
		func(c *Config) {
			c.Tools = map[string]ToolConfig{"t": {Fields: map[string]FieldRule{"a": {Aliases: map[string]string{"x": " "}}}}}
		},
	}
	for i, mutate := range bad {
		cfg := DefaultConfig()
		mutate(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("case %d: New accepted an invalid typed config", i)
		}
	}
	good := DefaultConfig()
	good.Typed = TypedConfig{DateOrder: "mdy", Year: "ignore", Zone: "distinct", Currency: "USD", PhoneRegion: "US",
		Aliases: map[string]string{"NY": "New York", "new york": "New York"}}
	if _, err := New(good); err != nil {
		t.Errorf("a valid typed config was refused: %v", err)
	}
}

// sgdCall is an SGD reservation as an agent restates it: every identity
// value spelled the way the user said it.
const sgdCall = `{"restaurant_name":"Sino","location":"San Jose","date":"March 1st","time":"half past 11 in the morning",
"number_of_seats":"two","amount":"$1,250.00","contact":"Ann@Example.com","confirm":"yes","site":"https://example.com/r/./sino"}`

// BenchmarkTypedCanonicalize is what typed comparison adds to a check:
// Canonicalize with typed comparison on and off, in one run, for the
// 1 KB booking and for a call whose every identity value is restated.
func BenchmarkTypedCanonicalize(b *testing.B) {
	on := DefaultConfig()
	on.Typed = TypedConfig{Year: "ignore", Currency: "USD"}
	off := DefaultConfig()
	off.Typed.Off = true
	// The SGD booking again with its date said as "next Friday", read
	// against a reference date.
	relCall := strings.Replace(sgdCall, `"March 1st"`, `"next Friday"`, 1)
	friday := Date{2019, time.March, 1}
	for _, call := range []struct{ name, args string }{{"1KB-booking", call1K}, {"sgd-restated", sgdCall}, {"sgd-relative-date", relCall}} {
		for _, mode := range []struct {
			name  string
			cfg   Config
			today Date
		}{{"typed-off", off, Date{}}, {"typed-on", on, Date{}}, {"typed-on-reference-date", on, friday}} {
			c := mustNew(b, mode.cfg)
			args := []byte(call.args)
			b.Run(call.name+"/"+mode.name, func(b *testing.B) {
				b.SetBytes(int64(len(args)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.CanonicalizeOn("book", args, mode.today); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
