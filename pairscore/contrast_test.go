package pairscore

import "testing"

// TestContrast is the funnel's contrast table: the guard moved here keeps
// its behaviour.
func TestContrast(t *testing.T) {
	cases := []struct {
		a, b, want string
	}{
		{"cancel the order", "do not cancel the order", "negation"},
		{"don't send it yet", "send it now", "negation"},
		{"Stocks close 2.47% higher", "Stocks close 0.39% higher", "numbers"},
		{"Today in History, April 23", "Today in History, Dec. 2", "numbers"},
		{"Tokyo stocks close up", "Tokyo stocks close down", "opposite words"},
		{"approve the budget", "reject the budget", "opposite words"},
		{"Please send me the Q3 report by Friday", "Could you send me the Q3 report by Friday?", ""},
		{"Ship 2 boxes to the warehouse", "Ship 2.0 boxes to the warehouse", ""},
		{"Ship 2 boxes to the warehouse", "Ship 20 boxes to the warehouse", "numbers"},
		{"pay 0.5 now", "pay .5 now", "numbers"}, // "5" after a dot that is no decimal point
		{"Ship 02 boxes", "ship 2 boxes", ""},
		{"check out the report in the folder", "see the report in the folder", ""},
		{"increase the limit and decrease the fee", "decrease the fee and increase the limit", ""},
		{"body: no", "body: no", ""},
	}
	for _, tc := range cases {
		if got := Contrast(tc.a, tc.b); got != tc.want {
			t.Errorf("Contrast(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
		if got := Contrast(tc.b, tc.a); got != tc.want {
			t.Errorf("Contrast is not symmetric for %q, %q: %q", tc.b, tc.a, got)
		}
	}
}
