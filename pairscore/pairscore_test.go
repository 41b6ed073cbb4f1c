package pairscore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/idem-dev/idem/internal/publicdata"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/embed"
	"github.com/idem-dev/idem/pairscore"
)

func model(t testing.TB) *pairscore.Model {
	t.Helper()
	m, err := pairscore.Default()
	if err != nil {
		t.Fatalf("the committed model: %v", err)
	}
	return m
}

// views returns the text views of a call of tool with field set to each
// text, as canon writes them for the funnel.
func views(t testing.TB, tool, field string, texts ...string) []string {
	t.Helper()
	cfg := canon.DefaultConfig()
	cfg.Tools = map[string]canon.ToolConfig{tool: {Fields: map[string]canon.FieldRule{field: {Class: canon.Text}}}}
	cn, err := canon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(texts))
	for i, s := range texts {
		args, _ := json.Marshal(map[string]string{field: s})
		c, err := cn.Canonicalize(tool, args)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = c.TextView()
	}
	return out
}

// pair embeds both views with the built-in encoder, as the funnel does.
func pair(t testing.TB, a, b string) pairscore.Pair {
	t.Helper()
	u, err := embed.SharedUSE()
	if err != nil {
		t.Fatalf("the built-in encoder: %v", err)
	}
	v, err := u.Embed(context.Background(), []string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	var c float64
	for i := range v[0] {
		c += float64(v[0][i]) * float64(v[1][i])
	}
	return pairscore.Pair{A: a, B: b, Cosines: []float64{c}}
}

// TestIssueExamples scores the issue's question pairs as the query of a
// search tool and the body of a comment, with the built-in encoder's
// cosine: questions that differ in the one word that carries them, and a
// reworded duplicate.
func TestIssueExamples(t *testing.T) {
	m := model(t)
	if m.Encoder() != embed.USEName {
		t.Fatalf("weights fitted to %q, the built-in encoder is %q", m.Encoder(), embed.USEName)
	}
	th := m.Thresholds()
	different := []struct {
		a, b, differs string
		// belowDuplicate: the scorer holds the pair below its duplicate
		// threshold. algorithms/programming and "in India" it does not
		// (see the package's README section): there only a read's
		// replay threshold keeps them apart.
		belowDuplicate bool
	}{
		{"How is the word 'anachronism' used in sentences?", "How is the word 'mischievous' used in sentences?", "anachronism / mischievous", true},
		{"What is the best site for learning algorithms?", "What is the best site for learning programming?", "algorithms / programming", false},
		{"What is the word equation for cell respiration?", "What is the word equation for aerobic respiration?", "cell / aerobic", true},
		{"How is capital gains tax calculated for a financial year?", "How is capital gains tax calculated for a financial year in India?", "– / India", false},
	}
	for _, as := range [][2]string{{"search", "query"}, {"add_issue_comment", "body"}} {
		for _, tc := range different {
			t.Run(as[1]+"/"+tc.differs, func(t *testing.T) {
				v := views(t, as[0], as[1], tc.a, tc.b)
				p := pair(t, v[0], v[1])
				s := m.Score(p)
				if s.Prob >= th.Replay {
					t.Errorf("p = %.3f ≥ the replay threshold %.3f: a read would be answered with another question's result", s.Prob, th.Replay)
				}
				if tc.belowDuplicate && s.Prob >= th.Duplicate {
					t.Errorf("p = %.3f ≥ the duplicate threshold %.3f", s.Prob, th.Duplicate)
				}
				// The scorer doubts more than the cosine says.
				if s.Prob >= p.Cosines[0] {
					t.Errorf("p = %.3f, not below the cosine %.3f", s.Prob, p.Cosines[0])
				}
				if len(s.Differs) == 0 || s.Differs[0] != tc.differs {
					t.Errorf("differs %q, want first %q", s.Differs, tc.differs)
				}
			})
		}
		t.Run(as[1]+"/reworded duplicate", func(t *testing.T) {
			v := views(t, as[0], as[1], "reset my password", "I need to change my password")
			s := m.Score(pair(t, v[0], v[1]))
			if s.Prob < th.Duplicate {
				t.Errorf("p = %.3f < the duplicate threshold %.3f: the reworded duplicate is missed", s.Prob, th.Duplicate)
			}
		})
	}
}

// TestContrastWeighs: the contrast guard's signals pull the probability
// down for texts that otherwise say the same.
func TestContrastWeighs(t *testing.T) {
	m := model(t)
	cases := []struct{ a, b, differs string }{
		{"cancel the order", "do not cancel the order", "– / not"},
		{"Stocks close 2.47% higher", "Stocks close 0.39% higher", "2.47 / 0.39"},
		{"Tokyo stocks close up", "Tokyo stocks close down", "up / down"},
	}
	for _, tc := range cases {
		same := m.Score(pairscore.Pair{A: tc.a, B: tc.a, Cosines: []float64{0.97}})
		got := m.Score(pairscore.Pair{A: tc.a, B: tc.b, Cosines: []float64{0.97}})
		if got.Prob >= same.Prob-0.1 {
			t.Errorf("%q / %q: p = %.3f, the text against itself %.3f", tc.a, tc.b, got.Prob, same.Prob)
		}
		if len(got.Differs) == 0 || got.Differs[0] != tc.differs {
			t.Errorf("%q / %q: differs %q, want first %q", tc.a, tc.b, got.Differs, tc.differs)
		}
		if len(same.Differs) != 0 {
			t.Errorf("%q against itself: differs %q", tc.a, same.Differs)
		}
	}
}

// TestScoreRises: with everything else equal, a higher cosine gives a
// higher probability, and an unknown cosine the lowest.
func TestScoreRises(t *testing.T) {
	m := model(t)
	a, b := "add_issue_comment\nbody: The build fails on main", "add_issue_comment\nbody: Build is failing on main"
	prev := -1.0
	for _, c := range []float64{0.5, 0.8, 0.9, 0.95, 1} {
		s := m.Score(pairscore.Pair{A: a, B: b, Cosines: []float64{c}})
		if s.Prob <= prev {
			t.Errorf("cosine %.2f: p = %.3f, not above %.3f", c, s.Prob, prev)
		}
		prev = s.Prob
	}
	// The lowest window decides.
	lo := m.Score(pairscore.Pair{A: a, B: b, Cosines: []float64{0.99, 0.7}})
	if lo.Cosine != 0.7 {
		t.Errorf("cosine read %v, want the lowest window's 0.7", lo.Cosine)
	}
	if none := m.Score(pairscore.Pair{A: a, B: b}); none.Prob >= lo.Prob {
		t.Errorf("no cosine: p = %.3f, want below %.3f", none.Prob, lo.Prob)
	}
}

// TestCosineFloor: no pair scored below the floor of a probability
// reaches it, and a higher probability has a higher floor.
func TestCosineFloor(t *testing.T) {
	m := model(t)
	prev := -1.0
	for _, p := range []float64{m.Thresholds().Ambiguous, m.Thresholds().Duplicate, m.Thresholds().Replay} {
		floor := m.CosineFloor(p)
		if floor <= prev || floor >= 1 {
			t.Fatalf("floor of %.3f: %v (the previous one %v)", p, floor, prev)
		}
		prev = floor
		for _, q := range append(stsPairs(t, 200), pairscore.Pair{A: "cancel it", B: "do not cancel it"}, pairscore.Pair{A: "cancel it", B: "cancel it"}) {
			q.Cosines = []float64{floor - 1e-9}
			if s := m.Score(q); s.Prob >= p {
				t.Errorf("p = %.4f ≥ %.4f at cosine %.4f, below the floor", s.Prob, p, floor)
			}
		}
	}
}

// TestConcurrent: one model scores from many goroutines, with the answers
// of a single one.
func TestConcurrent(t *testing.T) {
	m := model(t)
	ps := stsPairs(t, 40)
	want := make([]pairscore.Score, len(ps))
	for i, p := range ps {
		want[i] = m.Score(p)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, p := range ps {
				if got := m.Score(p); got.Prob != want[i].Prob || strings.Join(got.Differs, ";") != strings.Join(want[i].Differs, ";") {
					errs <- fmt.Sprintf("pair %d: %+v, alone %+v", i, got, want[i])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// stsPairs reads n STS-B dev pairs as comment text views, with a cosine
// that does not matter for speed.
func stsPairs(t testing.TB, n int) []pairscore.Pair {
	t.Helper()
	f, err := os.Open(publicdata.Path(t, "upstream", "stsb", "sts-dev.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []pairscore.Pair
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(out) < n {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) < 7 {
			continue
		}
		out = append(out, pairscore.Pair{
			A: "add_issue_comment\nbody: " + cols[5], B: "add_issue_comment\nbody: " + cols[6], Cosines: []float64{0.9},
		})
	}
	return out
}

// BenchmarkScore measures a text check's added cost beside the contrast
// guard alone (the baseline: what a text check pays today), on STS-B
// sentence pairs and on views of about 1 KiB each.
func BenchmarkScore(b *testing.B) {
	m := model(b)
	short := stsPairs(b, 200)
	long := make([]pairscore.Pair, 0, 50)
	for i := 0; i+4 < len(short) && len(long) < 50; i += 4 {
		var x, y strings.Builder
		x.WriteString("add_issue_comment\nbody:")
		y.WriteString("add_issue_comment\nbody:")
		for k := range 8 {
			x.WriteString(" " + strings.TrimPrefix(short[(i+k)%len(short)].A, "add_issue_comment\nbody: "))
			y.WriteString(" " + strings.TrimPrefix(short[(i+k)%len(short)].B, "add_issue_comment\nbody: "))
		}
		long = append(long, pairscore.Pair{A: x.String(), B: y.String(), Cosines: []float64{0.9}})
	}
	for _, set := range []struct {
		name string
		ps   []pairscore.Pair
	}{{"sentence", short}, {"1KiB", long}} {
		b.Run("contrast/"+set.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime()
			for i := 0; b.Loop(); i++ {
				p := set.ps[i%len(set.ps)]
				_ = pairscore.Contrast(p.A, p.B)
			}
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
		})
		b.Run("score/"+set.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime()
			for i := 0; b.Loop(); i++ {
				_ = m.Score(set.ps[i%len(set.ps)])
			}
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
		})
	}
}
