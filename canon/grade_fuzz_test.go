package canon

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzGrade: no pair of values panics the comparison; it is symmetric;
// Overall is Equal exactly when the identity digests are; a pair graded
// Restated or Equal shares its shape digest; a call is Equal to itself;
// Restates agrees with Compare.
func FuzzGrade(f *testing.F) {
	for _, s := range [][3]string{
		{"date", "March 4th", "2019-03-04"}, {"date", "04/27/2022", "2022-04-27"}, {"time", "7:30", "19:30"},
		{"amount", "$122", "122"}, {"amount", "thirty five dollars", "35"}, {"party", "two", "2"},
		{"city", "San Fran", "San Francisco"}, {"city", "Seattle, WA", "Seattle"}, {"city", "SF", "San Francisco"},
		{"airport", "KLIA International Airport", "Kuala Lumpur International Airport"},
		{"name", "Tandoori Mahal", "Tandoori Mahal Indian Restaurant"}, {"state", "U.S.", "United States"},
		{"city", "Santa Rosa", "Santa Clara"}, {"id", "pay_8xK2", "pay_8xk2"}, {"x", "’'’", "'"},
		{"city", "a, b, c", ", ,"}, {"name", "M’c D'", "Mc D"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	c, err := New(DefaultConfig())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, field, a, b string) {
		if !utf8.ValidString(field) || !utf8.ValidString(a) || !utf8.ValidString(b) || field == "" {
			return
		}
		call := func(v string) *Call {
			args, _ := json.Marshal(map[string]string{field: v, "city": "Paris"})
			x, err := c.CanonicalizeOn("t", args, march1)
			if err != nil {
				return nil
			}
			return x
		}
		x, y := call(a), call(b)
		if x == nil || y == nil {
			return
		}
		ab, ba := Compare(x, y, march1), Compare(y, x, march1)
		if ab.Overall != ba.Overall {
			t.Fatalf("%q vs %q: %v, the other way %v", a, b, ab.Overall, ba.Overall)
		}
		if (ab.Overall == Equal) != (x.IdentityDigest == y.IdentityDigest) {
			t.Fatalf("%q vs %q: %v, identity digests equal %v", a, b, ab.Overall, x.IdentityDigest == y.IdentityDigest)
		}
		if ab.Overall >= Restated && x.ShapeDigest != y.ShapeDigest {
			t.Fatalf("%q vs %q: %v with different shape digests", a, b, ab.Overall)
		}
		if cmp, ok := x.IdentityLeaves().Restates(y.IdentityLeaves(), march1); ok != (ab.Overall == Restated) || ok && len(cmp.Leaves) != len(ab.Leaves) {
			t.Fatalf("%q vs %q: Restates %v (%d leaves), Compare %v (%d leaves)", a, b, ok, len(cmp.Leaves), ab.Overall, len(ab.Leaves))
		}
		if xl, yl := x.IdentityLeaves(), y.IdentityLeaves(); xl.paths == yl.paths && xl.fixedDiffer(yl) && !xl.unreadable(yl) {
			t.Fatalf("%q vs %q: the digests say the fixed leaves differ, unreadable does not", a, b)
		}
		if self := Compare(x, x, march1); self.Overall != Equal {
			t.Fatalf("%q against itself: %+v", a, self)
		}
		for _, l := range ab.Leaves {
			if (l.Grade == Restated) != (l.Rule != "" && l.Rule != "typed" && l.Rule != "missing") {
				t.Fatalf("leaf %+v: a restated leaf names its reading, no other does", l)
			}
		}
	})
}

// FuzzSplitName: the words of a name are non-empty, hold no separator,
// and are in the value in order.
func FuzzSplitName(f *testing.F) {
	for _, s := range []string{"San Fran", "Seattle, WA", "Alchemy,  John MD", "'radium'", "Drive-In", "18|8 Fine Men's", "a.b.c", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		var w nameWords
		if !splitName(v, &w) {
			return
		}
		rest := v
		for _, word := range w.w[:w.n] {
			if word == "" || strings.IndexFunc(word, isNameSeparator) >= 0 {
				t.Fatalf("%q: word %q", v, word)
			}
			i := strings.Index(rest, word)
			if i < 0 {
				t.Fatalf("%q: word %q not in order", v, word)
			}
			rest = rest[i+len(word):]
		}
	})
}
