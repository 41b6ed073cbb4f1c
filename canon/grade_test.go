package canon

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// gradeCase: one field spelled two ways (JSON values, or whole argument
// objects when args is set), the grade the comparison must give, and the
// reading that must give it.
type gradeCase struct {
	name  string
	field string
	a, b  string
	want  Grade
	rule  string // for Restated
}

var march1 = Date{2019, time.March, 1}

func gradeOf(t *testing.T, c *Canonicalizer, tool string, a, b string, ref Date) (Comparison, *Call, *Call) {
	t.Helper()
	x := mustCanon(t, c, tool, a)
	y := mustCanon(t, c, tool, b)
	return Compare(x, y, ref), x, y
}

func runGradeCases(t *testing.T, cfg Config, tool string, cases []gradeCase) {
	t.Helper()
	c := mustNew(t, cfg)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tc.a, tc.b
			if tc.field != "" {
				a, b = `{"`+tc.field+`":`+tc.a+`}`, `{"`+tc.field+`":`+tc.b+`}`
			}
			cmp, x, y := gradeOf(t, c, "book", a, b, march1)
			if cmp.Overall != tc.want {
				t.Fatalf("%s vs %s: %v %+v, want %v", a, b, cmp.Overall, cmp.Leaves, tc.want)
			}
			if r, ok := x.IdentityLeaves().Restates(y.IdentityLeaves(), march1); ok != (cmp.Overall == Restated) || ok && len(r.Leaves) != len(cmp.Leaves) {
				t.Errorf("Restates: %v (%+v), Compare: %v", ok, r.Leaves, cmp.Overall)
			}
			if back := Compare(y, x, march1); back.Overall != cmp.Overall {
				t.Errorf("not symmetric: %v one way, %v the other", cmp.Overall, back.Overall)
			}
			if (cmp.Overall == Equal) != (x.IdentityDigest == y.IdentityDigest) {
				t.Errorf("Overall %v but identity digests equal = %v", cmp.Overall, x.IdentityDigest == y.IdentityDigest)
			}
			if cmp.Overall >= Restated && x.ShapeDigest != y.ShapeDigest {
				t.Errorf("graded %v with different shape digests", cmp.Overall)
			}
			if tc.want != Restated {
				return
			}
			var restated []LeafGrade
			for _, l := range cmp.Leaves {
				if l.Grade == Restated {
					restated = append(restated, l)
				}
			}
			if len(restated) != 1 || restated[0].Rule != tc.rule || restated[0].Reading == "" {
				t.Fatalf("restated leaves %+v, want one by %s", restated, tc.rule)
			}
			// The reading off, the pair is no longer restated by it.
			off := cfg
			off.Typed.ReadingsOff = []string{tc.rule}
			got, _, _ := gradeOf(t, mustNew(t, off), "book", a, b, march1)
			for _, l := range got.Leaves {
				if l.Rule == tc.rule {
					t.Errorf("with %s off: %+v", tc.rule, l)
				}
			}
			strict := cfg
			strict.Typed.ReadingsOff = []string{"all"}
			if got, _, _ := gradeOf(t, mustNew(t, strict), "book", a, b, march1); got.Overall != Different {
				t.Errorf("with every reading off: %v", got.Overall)
			}
		})
	}
}

// TestGradeReadings: each reading, on the spellings issue 18 names and
// others like them, gives Restated and says so; each trap stays
// Different.
func TestGradeReadings(t *testing.T) {
	runGradeCases(t, DefaultConfig(), "book", []gradeCase{
		// A date without a year, against the reference date 2019-03-01.
		{"year: March 4th", "date", q("March 4th"), q("2019-03-04"), Restated, ReadingYear},
		{"year: 4th of March", "check_in", q("4th of March"), q("2019-03-04"), Restated, ReadingYear},
		{"year: the reference date itself", "date", q("March 1st"), q("2019-03-01"), Restated, ReadingYear},
		{"year: next year once the day is past", "date", q("February 14th"), q("2020-02-14"), Restated, ReadingYear},
		{"year: February 29th in the coming leap year", "date", q("February 29th"), q("2020-02-29"), Restated, ReadingYear},
		{"trap: year: a day already past this year", "date", q("February 14th"), q("2019-02-14"), Different, ""},
		{"trap: year: more than a year on", "date", q("March 4th"), q("2020-03-04"), Different, ""},
		{"trap: another day", "date", q("March 4th"), q("2019-03-05"), Different, ""},
		{"trap: swapped day and month", "date", q("March 4th"), q("2019-04-03"), Different, ""},
		{"trap: swapped day and month, full dates", "date", q("2019-03-04"), q("2019-04-03"), Different, ""},
		// Numeric dates in the one order that is a date.
		{"date-order: 04/27/2022", "date", q("04/27/2022"), q("2022-04-27"), Restated, ReadingDateOrder},
		{"date-order: 27/04/2022", "date", q("27/04/2022"), q("2022-04-27"), Restated, ReadingDateOrder},
		{"trap: date-order: 03/04/2019 may be either", "date", q("03/04/2019"), q("2019-03-04"), Different, ""},
		// A 12-hour time without am/pm.
		{"twelve-hour: 7:30 in the evening", "time", q("7:30"), q("19:30"), Restated, ReadingTwelveHour},
		{"twelve-hour: 7:30 in the morning", "time", q("7:30"), q("07:30"), Restated, ReadingTwelveHour},
		{"trap: one hour apart", "time", q("18:00"), q("19:00"), Different, ""},
		{"trap: one hour apart, 12-hour", "time", q("7:30"), q("20:30"), Different, ""},
		{"trap: one hour apart, am/pm", "time", q("6 pm"), q("19:00"), Different, ""},
		// Amounts with a currency against bare numbers.
		{"currency: $122", "amount", q("$122"), q("122"), Restated, ReadingCurrency},
		{"currency: 161 bucks", "amount", q("161 bucks"), q("161"), Restated, ReadingCurrency},
		{"currency: 122 dollars, a JSON number", "amount", q("122 dollars"), `122`, Restated, ReadingCurrency},
		{"currency: thirty five dollars", "amount", q("thirty five dollars"), q("35"), Restated, ReadingCurrency},
		{"currency: €40 in a field of any name", "pay", q("€40"), `40`, Restated, ReadingCurrency},
		{"currency: $ can be USD", "amount", q("$122"), q("USD 122"), Restated, ReadingCurrency},
		{"trap: another currency", "amount", q("$122"), q("€122"), Different, ""},
		{"trap: another currency, codes", "amount", q("122 USD"), q("122 EUR"), Different, ""},
		{"trap: another amount", "amount", q("$122"), q("123"), Different, ""},
		{"trap: another currency named in the call", "", `{"amount":"$122","currency":"EUR"}`, `{"amount":"122","currency":"EUR"}`, Different, ""},
		{"currency: the currency named is the sign's", "", `{"amount":"$122","currency":"USD"}`, `{"amount":"122","currency":"USD"}`, Restated, ReadingCurrency},
		// Numbers in words outside count fields.
		{"number-words: two", "party", q("two"), `2`, Restated, ReadingNumberWords},
		{"trap: number-words: another number", "party", q("two"), `3`, Different, ""},
		// Case and spacing.
		{"case: 1355 broadway", "address", q("1355 broadway"), q("1355 Broadway"), Restated, ReadingCase},
		{"case: Santa ROsa", "city", q("Santa ROsa"), q("Santa Rosa"), Restated, ReadingCase},
		{"case: new alarm", "new_alarm_name", q("new alarm"), q("New alarm"), Restated, ReadingCase},
		{"case: spacing and punctuation", "doctor_name", q("Alchemy, John  MD"), q("Alchemy John MD"), Restated, ReadingCase},
		{"case: one long word", "song_name", q("SOrry"), q("Sorry"), Restated, ReadingCase},
		{"case: a three-letter name capitalized", "recipient_name", q("tom"), q("Tom"), Restated, ReadingCase},
		{"case: McDonald's", "restaurant_name", q("McDonald's"), q("Mcdonalds"), Restated, ReadingCase},
		{"trap: identifier keeps its case", "payment_id", q("pay_8xK2"), q("pay_8xk2"), Different, ""},
		{"trap: short code keeps its case", "genotype", q("Aa"), q("AA"), Different, ""},
		{"trap: three capitals keep their case", "code", q("ABC"), q("abc"), Different, ""},
		// Shortened names.
		{"subset: Tandoori Mahal", "restaurant_name", q("Tandoori Mahal"), q("Tandoori Mahal Indian Restaurant"), Restated, ReadingSubset},
		{"subset: another order", "player_name", q("Park Ji Sung"), q("Ji Sung Park"), Restated, ReadingSubset},
		{"subset: a dropped article", "museum_name", q("The Metropolitan Museum of Art"), q("Metropolitan Museum of Art"), Restated, ReadingSubset},
		{"trap: Santa Rosa vs Santa Clara", "city", q("Santa Rosa"), q("Santa Clara"), Different, ""},
		{"trap: a number left over", "terminal_name", q("Terminal"), q("Terminal 2"), Different, ""},
		{"trap: another house number", "address", q("135 Broadway"), q("1355 Broadway"), Different, ""},
		{"abbreviation: San Fran", "city", q("San Fran"), q("San Francisco"), Restated, ReadingAbbreviation},
		{"trap: San Jose vs Santa Clara", "city", q("San Jose"), q("Santa Clara"), Different, ""},
		{"initials: SF", "city", q("SF"), q("San Francisco"), Restated, ReadingInitials},
		{"initials: NYC", "city", q("NYC"), q("New York City"), Restated, ReadingInitials},
		{"initials: MoMA's stop word", "museum_name", q("MOMA"), q("Museum of Modern Art"), Restated, ReadingInitials},
		{"initials: KLIA International Airport", "airport_name", q("KLIA International Airport"), q("Kuala Lumpur International Airport"), Restated, ReadingInitials},
		{"trap: other initials", "city", q("SF"), q("Santa Clara"), Different, ""},
		{"qualifier: Seattle, WA", "city", q("Seattle, WA"), q("Seattle"), Restated, ReadingQualifier},
		{"qualifier: Austin, TX for Austin, Texas", "city", q("Austin, TX"), q("Austin, Texas"), Restated, ReadingQualifier},
		{"trap: Paris, France vs Paris, Texas", "city", q("Paris, France"), q("Paris, Texas"), Different, ""},
		{"trap: another city, same state", "city", q("Oakland, CA"), q("Fresno, CA"), Different, ""},
		{"region: CA for California", "state", q("CA"), q("California"), Restated, ReadingRegion},
		{"region: UK for United Kingdom", "country", q("UK"), q("United Kingdom"), Restated, ReadingRegion},
		{"region: U.S. for United States", "country", q("U.S."), q("United States"), Restated, ReadingRegion},
		{"trap: another state", "state", q("CA"), q("Colorado"), Different, ""},
		// Code is not a name.
		{"trap: a longer path in a command", "command", q("rm -rf /tmp/a"), q("rm -rf /tmp/a/b"), Different, ""},
		{"trap: another flag", "cmd", q("ls -la"), q("ls -la -h"), Different, ""},
		// Leaves one call lacks.
		{"trap: a leaf only one call has", "", `{"city":"Paris","date":"2019-03-04"}`, `{"city":"Paris"}`, Different, ""},
		{"equal: the same value", "city", q("Paris"), q("Paris"), Equal, ""},
		{"equal: a typed equality", "time", q("evening 7:30"), q("19:30"), Equal, ""},
		{"one restated leaf among equal ones", "", `{"city":"San Fran","date":"2019-03-04","party_size":2}`, `{"city":"San Francisco","date":"2019-03-04","party_size":2}`, Restated, ReadingAbbreviation},
		{"trap: one restated, one different", "", `{"city":"San Fran","date":"2019-03-04"}`, `{"city":"San Francisco","date":"2019-03-05"}`, Different, ""},
	})
}

func TestGradeEnumMembersStayDistinct(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Tools = map[string]ToolConfig{"book": {Schema: json.RawMessage(
		`{"type":"object","properties":{"seating_class":{"type":"string","enum":["Economy","Premium Economy","Business"]}}}`)}}
	runGradeCases(t, cfg, "book", []gradeCase{
		{"trap: two members", "seating_class", q("Economy"), q("Premium Economy"), Different, ""},
		{"a member in another case is the member", "seating_class", q("economy"), q("Economy"), Equal, ""},
		{"a non-member restating a member", "seating_class", q("Premium  Economy class"), q("Premium Economy"), Restated, ReadingSubset},
	})
}

func TestGradeCurrencyNamedByAnEnum(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Tools = map[string]ToolConfig{"pay": {Schema: json.RawMessage(
		`{"type":"object","properties":{"currency":{"type":"string","enum":["USD","EUR"]}}}`)}}
	runGradeCases(t, cfg, "pay", []gradeCase{
		{"trap: the call names another currency", "", `{"amount":"$5","currency":"EUR"}`, `{"amount":5,"currency":"EUR"}`, Different, ""},
		{"the call names the sign's currency", "", `{"amount":"$5","currency":"USD"}`, `{"amount":5,"currency":"USD"}`, Restated, ReadingCurrency},
	})
}

func TestGradeAliases(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Typed.Aliases = map[string]string{"SF": "San Francisco", "NY": "New York"}
	runGradeCases(t, cfg, "book", []gradeCase{
		{"an alias is equal", "city", q("SF"), q("San Francisco"), Equal, ""},
		{"an alias with a qualifier", "city", q("SF, CA"), q("San Francisco"), Restated, ReadingQualifier},
		{"an alias against a shortening", "city", q("SF"), q("San Fran"), Restated, ReadingAbbreviation},
		{"trap: two aliases", "city", q("SF"), q("NY"), Different, ""},
	})
}

// TestGradeMixedClasses: a field without a name hint is identity when
// short ("KLIA") and text when long: the two still grade by the name
// readings, and the shape digest does not keep them apart.
func TestGradeMixedClasses(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	long := mustCanon(t, c, "fly", `{"airport":"Kuala Lumpur International Airport Terminal One"}`)
	short := mustCanon(t, c, "fly", `{"airport":"KLIA Terminal One"}`)
	if long.Fields[0].Class != Text || short.Fields[0].Class != Identity {
		t.Fatalf("classes %v / %v, want text / identity", long.Fields[0].Class, short.Fields[0].Class)
	}
	if long.ShapeDigest != short.ShapeDigest {
		t.Error("shape digests differ")
	}
	cmp := Compare(short, long, Date{})
	if cmp.Overall != Restated || cmp.Leaves[0].Rule != ReadingInitials {
		t.Errorf("got %+v, want restated by initials", cmp)
	}
	other := mustCanon(t, c, "fly", `{"airport":"Changi"}`)
	if got := Compare(other, long, Date{}); got.Overall != Different {
		t.Errorf("Changi vs Kuala Lumpur: %v", got.Overall)
	}
	// Text in both calls is the semantic stage's, and a text field only
	// one call has does not make them different.
	a := mustCanon(t, c, "fly", `{"city":"Paris","note":"window seat if one is still free, please"}`)
	b := mustCanon(t, c, "fly", `{"city":"Paris","note":"an aisle seat would be better for me"}`)
	d := mustCanon(t, c, "fly", `{"city":"Paris"}`)
	for _, p := range [][2]*Call{{a, b}, {a, d}} {
		if got := Compare(p[0], p[1], Date{}); got.Overall != Equal || len(got.Leaves) != 1 {
			t.Errorf("%s vs %s: %+v, want the city alone, equal", p[0].Canonical, p[1].Canonical, got)
		}
	}
}

// TestGradeReferenceDate: a date without a year is read against its own
// call's reference date when the call has one, else against the one the
// comparison is given; with neither it is not read.
func TestGradeReferenceDate(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	yearless := []byte(`{"date":"March 4th"}`)
	full := mustCanon(t, c, "book", `{"date":"2020-03-04"}`)
	said2019, _ := c.CanonicalizeOn("book", yearless, march1)
	said2020, _ := c.CanonicalizeOn("book", yearless, Date{2020, time.March, 1})
	bare := mustCanon(t, c, "book", string(yearless))
	for _, tc := range []struct {
		name string
		call *Call
		ref  Date
		want Grade
	}{
		{"the call's own date wins", said2019, Date{2020, time.March, 1}, Different},
		{"the call's own date", said2020, march1, Restated},
		{"the comparison's date", bare, Date{2020, time.March, 1}, Restated},
		{"no date at all", bare, Date{}, Different},
	} {
		if got := Compare(tc.call, full, tc.ref).Overall; got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestGradeDifferentTools(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	a := mustCanon(t, c, "book", `{"city":"Paris"}`)
	b := mustCanon(t, c, "cancel", `{"city":"Paris"}`)
	if got := Compare(a, b, Date{}); got.Overall != Different || a.ShapeDigest == b.ShapeDigest {
		t.Errorf("two tools: %v, shapes equal %v", got.Overall, a.ShapeDigest == b.ShapeDigest)
	}
}

func TestGradeReadingsOffValidated(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Typed.ReadingsOff = []string{"case", "shortening"}
	_, err := New(cfg)
	if err == nil || !strings.Contains(err.Error(), `typed.readings_off[1] "shortening"`) {
		t.Fatalf("got %v, want an error naming readings_off[1]", err)
	}
}

// TestGradeReadingText: the reading says which values it took for one and
// why, in the order of the calls compared.
func TestGradeReadingText(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	cmp, _, _ := gradeOf(t, c, "book", `{"date":"March 4th"}`, `{"date":"2019-03-04"}`, march1)
	want := `"March 4th" = "2019-03-04" (the year of the reference date 2019-03-01)`
	if got := cmp.Leaves[0].Reading; got != want {
		t.Errorf("reading %q, want %q", got, want)
	}
	cmp, _, _ = gradeOf(t, c, "book", `{"time":"evening 7:30"}`, `{"time":"19:30"}`, march1)
	if l := cmp.Leaves[0]; l.Rule != "typed" || l.Reading != `time "evening 7:30" = "19:30"` {
		t.Errorf("typed equality %+v", l)
	}
}

// TestGradePaths: leaves are paired by their paths, however long (a key
// of 200 characters), and calls whose leaves sit on other paths are told
// so, leaf by leaf.
func TestGradePaths(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	long := strings.Repeat("k", 200)
	cmp, x, _ := gradeOf(t, c, "book", `{"`+long+`":"March 4th","city":"Paris"}`, `{"`+long+`":"2019-03-04","city":"Paris"}`, march1)
	if cmp.Overall != Restated || len(cmp.Leaves) != 2 {
		t.Fatalf("got %+v, want two leaves, restated", cmp)
	}
	for i, want := range []string{"city", long} {
		if got := cmp.Leaves[i].Path; !strings.HasSuffix(got, want) || len(got) > len(want)+3 {
			t.Errorf("leaf %d on path %q, want %s", i, got, want)
		}
	}
	if got := x.IdentityLeaves().Compare(x.IdentityLeaves(), march1); got.Overall != Equal {
		t.Errorf("a call against itself: %v", got.Overall)
	}
	cmp, _, _ = gradeOf(t, c, "book", `{"ab":"X1","c":"Y1"}`, `{"a":"X1","bc":"Y1"}`, march1)
	missing := 0
	for _, l := range cmp.Leaves {
		if l.Rule == "missing" {
			missing++
		}
	}
	if cmp.Overall != Different || missing != 4 {
		t.Errorf("other paths: %+v, want four leaves missing from one call", cmp)
	}
}

// TestGradeFixedDigests: calls whose fixed leaves (typed numbers, ids of
// code) differ are told Different from the digests, without reading their
// leaves, and the digests keep nothing from grading that is one value (a
// number and the same number in words) or that a reading could take for
// one (a restated date).
func TestGradeFixedDigests(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	leaves := func(args string) *IdentityLeaves { return mustCanon(t, c, "charge", args).IdentityLeaves() }
	a := leaves(`{"amount":1042,"customer_id":"cus_42","path":"/tmp/a"}`)
	for _, tc := range []struct {
		b       string
		differ  bool
		overall Grade
	}{
		{`{"amount":1017,"customer_id":"cus_42","path":"/tmp/a"}`, true, Different},
		{`{"amount":1042,"customer_id":"cus_42","path":"/tmp/b"}`, true, Different},
		{`{"amount":1042,"customer_id":"cus_17","path":"/tmp/a"}`, false, Different},
		{`{"amount":"one thousand forty two","customer_id":"cus_42","path":"/tmp/a"}`, false, Equal},
	} {
		b := leaves(tc.b)
		if got := a.paths == b.paths && a.fixedDiffer(b); got != tc.differ {
			t.Errorf("%s: fixed leaves differ %v, want %v", tc.b, got, tc.differ)
		}
		if got := a.Compare(b, march1).Overall; got != tc.overall {
			t.Errorf("%s: %v, want %v", tc.b, got, tc.overall)
		}
	}
	x := leaves(`{"date":"March 4th","party":2}`)
	if _, ok := x.Restates(leaves(`{"date":"2019-03-04","party":2}`), march1); !ok {
		t.Error("a restated date is not restated")
	}
	// An amount classed as code by its spelling is still read as money
	// (FuzzGrade found the digests taking it as final).
	if _, ok := leaves(`{"0":"0","city":"Paris"}`).Restates(leaves(`{"0":"A$0.0","city":"Paris"}`), march1); !ok {
		t.Error("0 and A$0.0 (money, classed as code): not restated")
	}
}
