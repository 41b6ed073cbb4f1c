package lexicon

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuild reads a tiny database in WordNet's format and writes what
// the lexicon must say of it (testdata/want.txt, read line by line):
// kitchen and bedroom are rooms (room and area are deep enough to join,
// structure is not), the kitchen is part of a house; a house is a kind of
// nothing deep enough and is left out; Chicago and Seattle are cities, each
// one city (an instance: "*"); "look" is more often a verb and
// "playing" is the verb's -ing form; a purse shares a sense with a bag;
// good and bad are opposites; "better" and "worse" lead to them, and
// "bestest" leads to no word the file holds.
func TestBuild(t *testing.T) {
	var b bytes.Buffer
	if err := Build(filepath.Join("testdata", "dict"), &b); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "want.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("Build wrote\n%s\nwant\n%s", got, want)
	}
}

// TestCommittedLexiconReproduces: pairscore/lexicon.txt is what Build
// makes of WordNet 3.0 (Debian's wordnet-base, which the test script
// installs; IDEM_WORDNET names another copy). It skips when there is none.
func TestCommittedLexiconReproduces(t *testing.T) {
	dir := os.Getenv("IDEM_WORDNET")
	if dir == "" {
		dir = "/usr/share/wordnet"
	}
	if _, err := os.Stat(filepath.Join(dir, "data.noun")); err != nil {
		t.Skipf("no WordNet database in %s (apt-get install wordnet-base): %v", dir, err)
	}
	var b bytes.Buffer
	if err := Build(dir, &b); err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join("..", "..", "pairscore", "lexicon.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), committed) {
		t.Errorf("pairscore/lexicon.txt is not what %s makes: run go run ./bench/cmd/lexicon -dict %s", dir, dir)
	}
}

// TestBadDatabase: a damaged file is an error naming it and its line, not
// a panic or a partial lexicon.
func TestBadDatabase(t *testing.T) {
	for name, line := range map[string]string{
		"data.noun":  "00000001 03 n 01 entity 0 002 @ 00000002 n 0000 | two pointers announced, one given",
		"index.noun": "entity n 2 0 1 1 00000001",
		"noun.exc":   "mice",
	} {
		dir := t.TempDir()
		src := filepath.Join("testdata", "dict")
		ents, err := os.ReadDir(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if e.Name() == name {
				b = append(b, []byte(line+"\n")...)
			}
			if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		err = Build(dir, &bytes.Buffer{})
		if !errors.Is(err, ErrDatabase) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s with %q: %v, want an ErrDatabase naming the file", name, line, err)
		}
	}
}

// FuzzDataLine: no line of a data file panics the reader.
func FuzzDataLine(f *testing.F) {
	f.Add("00000009 06 n 01 kitchen 0 002 @ 00000008 n 0000 #p 00000011 n 0000 | a room")
	f.Add("00000202 00 a 01 bad(a) 0 001 ! 00000201 a 0101 | having undesirable qualities")
	f.Add("1 2 3 ff x 0 999")
	f.Fuzz(func(t *testing.T, line string) {
		db := &database{synsets: map[synsetID]*synset{}, senses: map[byte]map[string][]string{'n': {}}, tagged: map[byte]map[string]int{'n': {}}, exc: map[string][]string{}}
		if db.dataLine('n', line) == nil {
			for _, s := range db.synsets {
				if len(s.words) == 0 {
					t.Fatalf("%q read as a synset with no words", line)
				}
			}
		}
		_ = db.indexLine('n', line)
		_ = db.excLine(line)
	})
}
