package pairscore

import (
	"slices"
	"strings"
	"testing"
)

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
		// Kinds of one thing swapped (the lexicon, from WordNet), which the
		// encoder scores 0.93–0.97.
		{"play Highway Tune on the kitchen speaker", "play Highway Tune on the bedroom speaker", "words of the same kind"},
		{"schedule a visit to Pine Meadows Apartments for next Tuesday", "schedule a visit to Pine Meadows Apartments for next Friday", "words of the same kind"},
		{"Find theater events in Chicago", "Find theater events in Seattle", "words of the same kind"},
		{"Chicago's mayor opened the fair", "Seattle's mayor opened the fair", "words of the same kind"},
		{"name IN ('alpha', 'beta', 'gamma')", "name:alpha OR name:beta OR name:gamma", ""}, // quoted words are words
		{"in the kitchen, the boy", "the girl in the bedroom", "opposite words"},            // whichever text comes first
		{"The gate is blue.", "The gate is yellow.", "words of the same kind"},
		{"NATO protesters acquitted of terrorism charges", "NATO protesters convicted of terrorism charges", "opposite words"},
		{"There is a young girl.", "There is a young boy.", "opposite words"},
		// Acronyms of one kind (names of agencies, currencies), one only in
		// each text; not when the other text holds or spells it out, when
		// one begins the other, or when the capitals name nothing.
		{"FBI agents searched the house", "CIA agents searched the house", "words of the same kind"},
		{"wire 500 USD to savings", "wire 500 EUR to savings", "words of the same kind"},
		{"flights to the US", "flights to the USA", ""},
		{"the WHO briefed the CDC", "the World Health Organization briefed the CDC and the NIH", ""},
		{"World Health Organization staff briefed the CDC and NIH", "WHO staff briefed the CDC", ""},
		{"ask the Department of Justice and the FBI", "ask the DOJ and the CIA", "words of the same kind"},
		{"OK, play it on the TV", "play it on the TV in HD", ""},
		{"please pay THIS invoice", "please pay the invoice NOW", ""}, // stress, not names
		{"hey do 거실 에어컨 실행", "perform 다용도실 통돌이 중지", ""},               // a script without capitals has no acronyms
		// Not swaps: synonyms, a kind and what it is a kind of, a part and
		// its whole, forms of one word, words the lexicon does not hold.
		{"reset my password", "I need to change my password", ""},
		{"put the couch in the hall", "put the sofa in the hall", ""},
		{"the woman holding a black purse", "a woman with a black bag", ""},
		{"walk the dog", "walk the animal", ""},
		{"he studied in England", "he studied in Britain", ""},
		{"find houses and apartments to rent", "find a house to rent", ""},
		{"A band is performing on a stage.", "A band is playing on a stage.", ""},
		{"the state signed a peace deal", "Israel signed a peace deal", ""},           // a kind and a name
		{"Iran and the atomic agency hold talks", "Iran and the IAEA hold talks", ""}, // an acronym
		{"How is the word 'anachronism' used in sentences?", "How is the word 'mischievous' used in sentences?", ""},
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

// TestAcronyms: the words written in capitals, but not a line written all
// in capitals (a headline), judged by its value when it is a text view's
// "label: value".
func TestAcronyms(t *testing.T) {
	cases := []struct {
		text string
		want []string
	}{
		{"The UN met the EU", []string{"un", "eu"}},
		{"THE UN MET THE EU", nil},
		{"send_email\nbody: THE UN MET THE EU\n", nil},
		{"send_email\nsubject: UN talks\nbody: THE EU MET\n", []string{"un"}},
		{"body: I. ATLANTIC REQUIREMENTS .", nil},
		{"a note: the FBI and IBM", []string{"fbi", "ibm"}}, // a label with a space is no label
		{"Éire and the ÉU", []string{"éu"}},
		{"거실 에어컨", nil},
	}
	for _, tc := range cases {
		if got := acronyms(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("acronyms(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

// TestSpelledOut: an acronym's letters begin consecutive words, function
// words giving theirs or not; a pass over the words, so that a long text
// of function words costs no more than its length.
func TestSpelledOut(t *testing.T) {
	cases := []struct {
		acr, text string
		want      bool
	}{
		{"who", "World Health Organization", true},
		{"doj", "the Department of Justice said", true},
		{"usa", "the United States of America", true},
		{"dj", "the Department of Justice said", true},
		{"un", "United and Nations", true},
		{"un", "United Kingdom Nations", false},
		{"nasa", "National Aeronautics and Space Administration", true},
		{"abc", "a b", false},
		{"aaab", strings.Repeat("a ", 5000) + "b", true},
		{"aaac", strings.Repeat("a ", 5000) + "b", false},
	}
	for _, tc := range cases {
		if got := spelledOut(tc.acr, words(tc.text)); got != tc.want {
			t.Errorf("spelledOut(%q, %.40q) = %v, want %v", tc.acr, tc.text, got, tc.want)
		}
	}
}
