package embed

import (
	"encoding/csv"
	"encoding/json"
	"flag"
	"github.com/idem-dev/idem/internal/publicdata"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

var updateTexts = flag.Bool("update", false, "rewrite ../bench/tfjs/texts.json from the STS-B dev set")

// texts200Path holds the 200 texts (8-60 tokens) that BenchmarkUSETexts200
// and the TF.js reference (bench/tfjs/run.mjs) both run, with their ids.
var texts200Path = filepath.Join("..", "bench", "tfjs", "texts.json")

type benchText struct {
	Text string `json:"text"`
	IDs  []int  `json:"ids"`
}

func loadTexts200(t testing.TB) []benchText {
	t.Helper()
	b, err := os.ReadFile(texts200Path)
	if err != nil {
		t.Fatal(err)
	}
	var texts []benchText
	if err := json.Unmarshal(b, &texts); err != nil {
		t.Fatalf("%s: %v", texts200Path, err)
	}
	return texts
}

// TestTFJSTexts checks the benchmark texts: 200 distinct texts of 8 to 60
// tokens whose stored ids are the ones our tokenizer gives, so that TF.js,
// fed those ids, embeds what we embed. With -update it picks them again:
// sentences of the STS-B dev then train sets from the parts in openFiles,
// their token counts spread evenly over 8..60.
func TestTFJSTexts(t *testing.T) {
	u := testEncoder(t)
	if *updateTexts {
		writeTexts200(t, u)
	}
	texts := loadTexts200(t)
	if len(texts) != 200 {
		t.Fatalf("%d texts, want 200", len(texts))
	}
	seen := map[string]bool{}
	for i, bt := range texts {
		if seen[bt.Text] {
			t.Errorf("text %d repeated", i)
		}
		seen[bt.Text] = true
		tk, err := u.Tokenize(bt.Text)
		if err != nil {
			t.Fatalf("text %d: %v", i, err)
		}
		if !slices.Equal(tk.IDs, bt.IDs) {
			t.Errorf("text %d: stored ids differ from the tokenizer's", i)
		}
		if n := tk.Count(); n < 8 || n > 60 {
			t.Errorf("text %d: %d tokens, want 8..60", i, n)
		}
	}
}

func writeTexts200(t *testing.T, u *USE) {
	var cands []benchText
	seen := map[string]bool{}
	for _, name := range []string{"sts-dev.csv", "sts-train.csv"} {
		cands = stsbTexts(t, u, name, cands, seen)
	}
	sort.SliceStable(cands, func(i, j int) bool { return len(cands[i].IDs) < len(cands[j].IDs) })
	// Token counts spread evenly over 8..60: for each target count, the
	// first unused text of the nearest count.
	used := make([]bool, len(cands))
	picked := make([]benchText, 200)
	for i := range picked {
		want := 8 + i*52/199
		best := -1
		for j, c := range cands {
			if used[j] {
				continue
			}
			if best < 0 || abs(len(c.IDs)-want) < abs(len(cands[best].IDs)-want) {
				best = j
			}
		}
		if best < 0 {
			t.Fatalf("only %d candidate texts", len(cands))
		}
		used[best], picked[i] = true, cands[best]
	}
	var b strings.Builder
	b.WriteString("[\n")
	for i, bt := range picked {
		line, err := json.Marshal(bt)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		if i < len(picked)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	if err := os.WriteFile(texts200Path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// openFiles are the STS-B parts whose texts carry a licence that allows
// shipping 200 of them: image captions (CC BY-SA), Stack Exchange answers
// (CC BY-SA 3.0), EMM headlines (with acknowledgement).
var openFiles = map[string]bool{"images": true, "answers-forums": true, "answer-answer": true, "headlines": true}

// stsbTexts appends the distinct sentences of 8-60 tokens of one STS-B file
// (tab-separated: genre, file, year, id, score, sentence1, sentence2).
func stsbTexts(t *testing.T, u *USE, name string, cands []benchText, seen map[string]bool) []benchText {
	f, err := os.Open(publicdata.Path(t, "upstream", "stsb", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.Comma, r.LazyQuotes, r.FieldsPerRecord = '\t', true, -1
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(rec) < 7 || !openFiles[rec[1]] {
			continue
		}
		for _, s := range rec[5:7] {
			s = strings.TrimSpace(s)
			if seen[s] {
				continue
			}
			seen[s] = true
			tk, err := u.Tokenize(s)
			if err != nil || tk.Count() < 8 || tk.Count() > 60 {
				continue
			}
			cands = append(cands, benchText{Text: s, IDs: tk.IDs})
		}
	}
	return cands
}
