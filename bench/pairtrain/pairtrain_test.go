package pairtrain

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idem-dev/idem/bench"
	"github.com/idem-dev/idem/embed"
	"github.com/idem-dev/idem/internal/publicdata"
	"github.com/idem-dev/idem/pairscore"
)

// countingEncoder is a deterministic fake at the edge: each text's vector
// is a function of its bytes; it counts the texts it embedded.
type countingEncoder struct {
	embedded int
}

func (e *countingEncoder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, 4)
		for k := range v {
			v[k] = float32(hash32(t+string(rune('a'+k)))) / (1 << 32)
		}
		out[i] = v
	}
	e.embedded += len(texts)
	return out, nil
}
func (e *countingEncoder) Dim() int                              { return 4 }
func (e *countingEncoder) Name() string                          { return "fake/enc@1" }
func (e *countingEncoder) Tokenize(string) (embed.Tokens, error) { return embed.Tokens{}, nil }
func (e *countingEncoder) MaxTokens() int                        { return 128 }

var _ bench.Encoder = (*countingEncoder)(nil)

// TestCache: a second run embeds nothing and gets the same bits; a torn
// last record (an interrupted run) is dropped, not read.
func TestCache(t *testing.T) {
	dir := t.TempDir()
	texts := []string{"reset my password", "I need to change my password", "reset my password"}
	enc := &countingEncoder{}
	c, err := OpenCache(dir, enc, 4)
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.Embed(context.Background(), texts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if enc.embedded != 2 {
		t.Errorf("embedded %d texts, want 2 (one repeated)", enc.embedded)
	}
	again := &countingEncoder{}
	c2, err := OpenCache(dir, again, 4)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c2.Embed(context.Background(), texts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.embedded != 0 {
		t.Errorf("second run embedded %d texts, want 0", again.embedded)
	}
	for i := range first {
		if !slices.Equal(first[i], second[i]) {
			t.Errorf("text %d: cached vector %v, computed %v", i, second[i], first[i])
		}
	}
	// Tear the last record.
	files, _ := filepath.Glob(filepath.Join(dir, "*.vec"))
	if len(files) != 1 {
		t.Fatalf("cache files %v", files)
	}
	st, _ := os.Stat(files[0])
	if err := os.Truncate(files[0], st.Size()-3); err != nil {
		t.Fatal(err)
	}
	torn := &countingEncoder{}
	c3, err := OpenCache(dir, torn, 4)
	if err != nil {
		t.Fatal(err)
	}
	if c3.Len() != 1 {
		t.Errorf("after a torn record: %d vectors, want 1", c3.Len())
	}
	if _, err := c3.Embed(context.Background(), texts, nil); err != nil || torn.embedded != 1 {
		t.Errorf("after a torn record: embedded %d (err %v), want the lost one again", torn.embedded, err)
	}
	if _, err := OpenCache(dir, torn, 8); err == nil {
		t.Error("a cache of 4-d vectors opened for 8-d ones")
	}
}

// TestFitRecovers: the fit finds the weights that generated the labels.
func TestFitRecovers(t *testing.T) {
	var rows []pairscore.Features
	var same []bool
	var wt []float64
	for i := range 4000 {
		var f pairscore.Features
		f[pairscore.FCosine] = float64(hash32(string(rune(i)))%1000) / 1000
		f[pairscore.FNumbers] = float64(hash32("n"+string(rune(i))) % 3)
		z := -6 + 10*f[pairscore.FCosine] - 1.5*f[pairscore.FNumbers]
		p := 1 / (1 + math.Exp(-z))
		u := float64(hash32("u"+string(rune(i)))) / (1 << 32)
		rows, same, wt = append(rows, f), append(same, u < p), append(wt, 1)
	}
	bias, w, err := fitLogistic(rows, same, wt, []int{pairscore.FCosine, pairscore.FNumbers}, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"bias", bias, -6}, {"cosine", w[pairscore.FCosine], 10}, {"numbers", w[pairscore.FNumbers], -1.5}} {
		if math.Abs(c.got-c.want) > 0.25*math.Abs(c.want) {
			t.Errorf("%s: %.3f, want about %.1f", c.name, c.got, c.want)
		}
	}
	if w[pairscore.FUnshared] != 0 {
		t.Errorf("a feature not in use weighs %v", w[pairscore.FUnshared])
	}
}

// TestOperatingPoints checks the threshold searches on a small ranking.
func TestOperatingPoints(t *testing.T) {
	score := []float64{0.9, 0.8, 0.7, 0.6, 0.5, 0.4}
	same := []bool{true, false, true, true, false, false}
	if p := atRecall(score, same, 2.0/3); p.Threshold != 0.7 || p.TP != 2 || p.FP != 1 {
		t.Errorf("at recall 2/3: %+v", p)
	}
	if p := atFP(score, same, 0); p.Threshold != 0.9 || p.TP != 1 {
		t.Errorf("at 0 false positives: %+v", p)
	}
	if p := atFP(score, same, 1); p.Threshold != 0.6 || p.TP != 3 || p.FP != 1 {
		t.Errorf("at 1 false positive: %+v", p)
	}
	// The lowest threshold above which precision never drops below the
	// target: 0.8 already breaks 0.75.
	if p := atPrecision(score, same, 0.75); p.Threshold != 0.9 {
		t.Errorf("at precision 0.75: %+v", p)
	}
	if p := atPrecision(score, same, 0.5); p.Threshold != 0.4 || p.TP != 3 {
		t.Errorf("at precision 0.5: %+v", p)
	}
	q := quality(score, same)
	if math.Abs(q.AUC-7.0/9) > 1e-12 {
		t.Errorf("AUC %v, want 7/9", q.AUC)
	}
}

// TestSplitsApart reads the public data as training does: no STS-B dev
// pair (the test set, from which the committed stsb-dev traffic set was
// built) is among the pairs that fit or tune the weights, and Train and
// Dev share no group.
func TestSplitsApart(t *testing.T) {
	up := publicdata.Path(t, "upstream")
	v := newViewer()
	exs, err := readAll(v, up)
	if err != nil {
		t.Fatal(err)
	}
	var train, test, bfcl []Example
	for _, e := range exs {
		switch {
		case e.Split == Test:
			test = append(test, e)
		case e.Source == "stsb":
			train = append(train, e)
		case e.Source == "bfcl":
			bfcl = append(bfcl, e)
		}
	}
	tested := map[string]bool{}
	for _, e := range test {
		tested[e.A+"\x00"+e.B], tested[e.B+"\x00"+e.A] = true, true
	}
	counts := map[Split]int{}
	for _, e := range train {
		counts[e.Split]++
		if tested[e.A+"\x00"+e.B] {
			t.Errorf("STS-B train pair %s is also a test pair", e.ID)
		}
	}
	if counts[Train] == 0 || counts[Dev] == 0 || counts[Test] != 0 {
		t.Errorf("STS-B train split into %v", counts)
	}
	// A BFCL function's pairs sit on one side.
	side := map[string]Split{}
	for _, e := range bfcl {
		fn, _, _ := strings.Cut(e.A, "\n")
		if s, ok := side[fn]; ok && s != e.Split {
			t.Fatalf("function %s has pairs in %s and %s", fn, s, e.Split)
		}
		side[fn] = e.Split
	}
	// Every comment of the committed traffic set is a test pair's text.
	set, err := bench.ReadDir(filepath.Join("..", "..", "testdata", "traffic", "stsb-dev"))
	if err != nil {
		t.Fatal(err)
	}
	views := map[string]bool{}
	for _, e := range test {
		views[e.A], views[e.B] = true, true
	}
	for _, ev := range set.Events {
		var args struct{ Body string }
		if err := json.Unmarshal(ev.Arguments, &args); err != nil {
			t.Fatal(err)
		}
		if !views["add_issue_comment\nbody: "+strings.Join(strings.Fields(args.Body), " ")] {
			t.Errorf("line %d: the traffic set's comment is not a test pair's", ev.Line)
		}
	}
}

// TestCommittedWeightsReproduce trains as `go run ./bench/cmd/pairtrain
// -check` does, with the built-in encoder, and fails unless the IDF table
// and weights committed in pairscore/ are what it makes, byte for byte: a
// change to the encoder's arithmetic, the features or the data readers
// that moves the weights must refit them (`go run ./bench/cmd/pairtrain`).
func TestCommittedWeightsReproduce(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the scorer on every pair (about 8,400 texts to embed): not in -short")
	}
	cfg := DefaultConfig()
	cfg.Upstream = publicdata.Path(t, "upstream")
	cfg.Traffic = []string{filepath.Join("..", "..", "testdata", "traffic", "stsb-dev")}
	enc, err := embed.NewUSE(embed.DefaultUSEConfig())
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(t.Context(), cfg, enc, enc.Dim(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name string
		made []byte
	}{{"idf.txt", res.IDF}, {"weights.json", res.Weights}} {
		have, err := os.ReadFile(filepath.Join("..", "..", "pairscore", f.name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, f.made) {
			t.Errorf("pairscore/%s is not what training makes: run `go run ./bench/cmd/pairtrain` from the repository root and commit it", f.name)
		}
	}
}
