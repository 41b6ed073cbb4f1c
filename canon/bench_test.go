package canon

import (
	"bytes"
	"encoding/json"
	"testing"
)

// call1K is a realistic ~1 KB tool call: an airline booking as tau-bench's
// agents send it, with a free-text note.
const call1K = `{"user_id":"mia_li_3668","origin":"JFK","destination":"SEA","flight_type":"one_way","cabin":"economy",
"flights":[{"flight_number":"HAT136","date":"2024-05-20"},{"flight_number":"HAT039","date":"2024-05-20"}],
"passengers":[{"first_name":"Mia","last_name":"Li","dob":"1990-04-05"},{"first_name":"Noah","last_name":"Brown","dob":"1988-11-12"}],
"payment_methods":[{"payment_id":"certificate_7504069","amount":250},{"payment_id":"credit_card_4421486","amount":5.00}],
"total_baggages":3,"nonfree_baggages":0,"insurance":"no",
"note":"The passenger asked for a window seat if one is still available, and would like to be seated next to her travel companion. She mentioned a nut allergy, so please flag the meal preference on both legs of the journey.",
"contact":{"email":"mia.li@example.com","phone":"+1-555-0100","address":"123 Elm Street, Suite 641, Austin, TX 78712"},
"request_id":"2b7c1f0e-8a55-4e0b-9a77-1f0c3b6f4d21"}`

func BenchmarkCanonicalize(b *testing.B) {
	c, err := New(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	args := []byte(call1K)
	b.Run("canon", func(b *testing.B) {
		b.SetBytes(int64(len(args)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Canonicalize("book_reservation", args); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The baseline: what a service would do without canon, decode with
	// UseNumber and re-encode with sorted keys, no classes, no hash.
	b.Run("baseline-encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(args)))
		b.ReportAllocs()
		var out bytes.Buffer
		for b.Loop() {
			d := json.NewDecoder(bytes.NewReader(args))
			d.UseNumber()
			var v any
			if err := d.Decode(&v); err != nil {
				b.Fatal(err)
			}
			out.Reset()
			enc := json.NewEncoder(&out)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
