package canon

import "testing"

// gradePairs are SGD-shaped calls (a restaurant booking, five identity
// leaves), and a charge, each with the earlier record it is graded
// against.
var gradePairs = []struct{ name, a, b string }{
	{"equal", `{"city":"San Jose","date":"2019-03-07","party_size":"2","restaurant_name":"Sumo Sushi Boat","time":"evening 7:30"}`,
		`{"city":"San Jose","date":"2019-03-07","party_size":"2","restaurant_name":"Sumo Sushi Boat","time":"19:30"}`},
	{"restated-year", `{"city":"San Jose","date":"March 7th","party_size":"2","restaurant_name":"Sumo Sushi Boat","time":"19:30"}`,
		`{"city":"San Jose","date":"2019-03-07","party_size":"2","restaurant_name":"Sumo Sushi Boat","time":"19:30"}`},
	{"restated-name", `{"city":"San Jose","date":"2019-03-07","party_size":"2","restaurant_name":"Tandoori Mahal","time":"19:30"}`,
		`{"city":"San Jose","date":"2019-03-07","party_size":"2","restaurant_name":"Tandoori Mahal Indian Restaurant","time":"19:30"}`},
	{"different", `{"city":"Santa Rosa","date":"2019-03-08","party_size":"2","restaurant_name":"Oneup","time":"18:30"}`,
		`{"city":"Santa Clara","date":"2019-03-07","party_size":"2","restaurant_name":"Bombay To Goa","time":"17:30"}`},
	// The load benchmark's calls: nothing says their values are
	// unreadable as one another, so the leaves are graded until one
	// differs.
	{"different-graded", `{"amount":1042,"currency":"EUR","customer_id":"cus_s1_42","invoice":"inv-42"}`,
		`{"amount":1017,"currency":"EUR","customer_id":"cus_s1_17","invoice":"inv-17"}`},
}

// BenchmarkCompare grades a call against an earlier record kept as
// IdentityLeaves (what the funnel does per candidate), beside the two
// baselines: comparing identity digests (today's gate, no readings) and
// canonicalizing the record again before grading (what grading would cost
// without the kept leaves).
func BenchmarkCompare(b *testing.B) {
	c, err := New(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range gradePairs {
		x, _ := c.CanonicalizeOn("Restaurants_1.ReserveRestaurant", []byte(p.a), march1)
		y, _ := c.CanonicalizeOn("Restaurants_1.ReserveRestaurant", []byte(p.b), march1)
		xl, yl := x.IdentityLeaves(), y.IdentityLeaves()
		b.Run(p.name+"/kept-leaves", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				xl.Compare(yl, march1)
			}
		})
		b.Run(p.name+"/restates", func(b *testing.B) { // what the funnel's grading calls
			b.ReportAllocs()
			for b.Loop() {
				xl.Restates(yl, march1)
			}
		})
		b.Run(p.name+"/baseline-digest", func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if x.IdentityDigest == y.IdentityDigest {
					n++
				}
			}
			_ = n
		})
		b.Run(p.name+"/baseline-recanonicalize", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				again, err := c.CanonicalizeOn(y.Tool, y.Canonical, march1)
				if err != nil {
					b.Fatal(err)
				}
				xl.Compare(again.IdentityLeaves(), march1)
			}
		})
	}
}

// BenchmarkIdentityLeaves: building the kept form of a call; B/op is
// what the funnel keeps per record (the leaves copy what they hold).
func BenchmarkIdentityLeaves(b *testing.B) {
	c, err := New(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	for _, in := range []struct{ name, args string }{{"sgd-booking", gradePairs[0].b}, {"1KB-call", call1K}} {
		call, err := c.CanonicalizeOn("book", []byte(in.args), march1)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				call.IdentityLeaves()
			}
		})
	}
}
