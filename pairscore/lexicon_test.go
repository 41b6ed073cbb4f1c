package pairscore

import (
	"runtime"
	"strings"
	"sync"
	"testing"
)

// TestLexiconReads checks the embedded file as the guard reads it: every
// line is one the parser takes, and the words the guard's tests rely on
// are there.
func TestLexiconReads(t *testing.T) {
	l := theLexicon()
	lines, nouns, opposites, forms := 0, 0, 0, 0
	for line := range strings.Lines(lexiconFile) {
		lines++
		f := strings.Fields(line)
		switch {
		case lines == 1:
			if !strings.HasPrefix(line, "# pairscore lexicon v1") {
				t.Fatalf("header %q", line)
			}
		case len(f) >= 4 && f[0] == "n":
			nouns++
			if parseNoun(f[2:]) == nil {
				t.Errorf("line %d does not read: %q", lines, line)
			}
		case len(f) == 3 && f[0] == "o":
			opposites++
		case len(f) == 3 && f[0] == "x":
			forms++
		default:
			t.Errorf("line %d is of no kind: %q", lines, line)
		}
	}
	if len(l.nouns) != nouns || len(l.forms) != forms {
		t.Errorf("parsed %d nouns and %d forms of %d and %d", len(l.nouns), len(l.forms), nouns, forms)
	}
	for _, w := range []string{"kitchen", "bedroom", "tuesday", "chicago", "purse", "bag"} {
		if l.noun(w) == nil {
			t.Errorf("no noun %q", w)
		}
	}
	if nouns < 30000 || opposites < 3000 {
		t.Errorf("%d nouns, %d opposites: the file is short", nouns, opposites)
	}
}

// BenchmarkLexiconLoad measures what the first comparison after start
// pays (Warm pays it at start instead) and the heap the lexicon keeps.
func BenchmarkLexiconLoad(b *testing.B) {
	var heap uint64
	for b.Loop() {
		var before, after runtime.MemStats
		lexOnce, lex = sync.Once{}, nil
		runtime.GC()
		runtime.ReadMemStats(&before)
		theLexicon()
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = after.HeapAlloc - before.HeapAlloc
	}
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
}

// parseNoun reads one noun line's fields past the word into an entry, as
// the lexicon's reader does; nil when they do not read or name no deep
// ancestor.
func parseNoun(f []string) nounEntry {
	var p nounParser
	e, ok := p.append(nil, f)
	if !ok {
		return nil
	}
	return e
}
