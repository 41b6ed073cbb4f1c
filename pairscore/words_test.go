package pairscore

import (
	"slices"
	"testing"
)

func TestFold(t *testing.T) {
	groups := [][]string{
		{"change", "changes", "changed", "changing"},
		{"password", "passwords", "Password's"},
		{"learn", "learning", "learned", "learns"},
		{"stop", "stopped", "stopping", "stops"},
		{"city", "cities"},
		{"box", "boxes"},
		{"reserve", "reserved", "reserves", "reserving"},
	}
	for _, g := range groups {
		for _, w := range g[1:] {
			if fold(w) != fold(g[0]) {
				t.Errorf("fold(%q) = %q, fold(%q) = %q: want equal", w, fold(w), g[0], fold(g[0]))
			}
		}
	}
	apart := [][2]string{{"algorithm", "programming"}, {"bus", "bu"}, {"class", "clas"}, {"this", "thi"}, {"need", "ne"}}
	for _, p := range apart {
		if fold(p[0]) == fold(p[1]) {
			t.Errorf("fold(%q) = fold(%q) = %q: want different", p[0], p[1], fold(p[0]))
		}
	}
}

func TestContentWords(t *testing.T) {
	view := "search\nquery: How is the word 'Anachronism' used in sentences? Ask Ann not 2 times\nnote: \"quoted words\" here, don't"
	got := contentWords(view, nil)
	var keys, caps, quoted []string
	for _, tk := range got {
		keys = append(keys, tk.key)
		if tk.caps {
			caps = append(caps, tk.surface)
		}
		if tk.quoted {
			quoted = append(quoted, tk.surface)
		}
	}
	// The tool and the paths are not words of the text; function words,
	// numbers and negations have features of their own.
	if want := []string{"word", "anachronism", "us", "sentenc", "ask", "ann", "tim", "quot", "word"}; !slices.Equal(keys, want) {
		t.Errorf("keys %q, want %q", keys, want)
	}
	// "How" and "Ask" start sentences; "Anachronism" and "Ann" do not.
	if want := []string{"Anachronism", "Ann"}; !slices.Equal(caps, want) {
		t.Errorf("capitalised %q, want %q", caps, want)
	}
	if want := []string{"Anachronism", "quoted", "words"}; !slices.Equal(quoted, want) {
		t.Errorf("quoted %q, want %q", quoted, want)
	}
	// A text of one line is all value.
	if got := contentWords("reset my password", nil); len(got) != 2 || got[0].key != "reset" {
		t.Errorf("plain text: %+v", got)
	}
}

func TestFoldKeepsShortStems(t *testing.T) {
	for _, w := range []string{"thing", "bring", "string", "shed"} {
		if got := fold(w); got != w {
			t.Errorf("fold(%q) = %q: no vowel would be left in the stem", w, got)
		}
	}
	if fold("things") == fold("the") {
		t.Error(`"things" folds like the stopword "the"`)
	}
}
