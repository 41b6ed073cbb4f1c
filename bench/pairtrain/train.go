// Package pairtrain trains and evaluates the pair scorer (package
// pairscore) on the public data the project has, deterministically: the
// same data give the same IDF table and weights, byte for byte, whether
// the embeddings come from the cache or from the encoder.
//
// Data: STS-B train (pairs scored ≥ 4.5 say the same thing, ≤ 2.0 do
// not; the cut-offs of the committed traffic sets), SGD-X (one intent's or
// slot's description in two of its five crowd paraphrases: the same; two
// intents or slots of one service: different), SGD confirmations before a
// corrected call (different values in nearly the same words), and BFCL
// questions to one function (equal ground truth: the same; other
// arguments: different). Each source is split into Train (fits the
// weights) and Dev (chooses the regularization and the thresholds) by the
// hash of a group, so that one function's or service's pairs stay on one
// side. Test is STS-B dev, and the committed traffic set built from it,
// replayed through the funnel: measured, never used to choose.
package pairtrain

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idem-dev/idem/bench"
	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/pairscore"
)

// Config configures a training run. Start from DefaultConfig.
type Config struct {
	// Upstream is the public data folder (SOURCES.md).
	Upstream string
	// Traffic are traffic sets evaluated as the funnel decides them.
	Traffic []string
	// CacheDir keeps embeddings between runs; "" keeps none.
	CacheDir string
	// Lambdas are the L2 penalties tried; Dev log loss picks one.
	Lambdas []float64
	// MinDF is the IDF table's least document frequency kept.
	MinDF int
	// Progress, when set, hears how many texts were embedded.
	Progress func(done, total int)
	// Dump, when set, receives every example with its features as TSV.
	Dump io.Writer
}

// DefaultConfig reads ../shared/data/upstream and testdata/traffic/stsb-dev
// relative to the repository root.
func DefaultConfig() Config {
	return Config{
		Upstream: filepath.Join("..", "shared", "data", "upstream"),
		Traffic:  []string{filepath.Join("testdata", "traffic", "stsb-dev")},
		Lambdas:  []float64{0.01, 0.1, 1, 10, 100},
		MinDF:    3,
	}
}

// Output is what a run writes: the committed files.
type Output struct {
	IDF     []byte // pairscore/idf.txt
	Weights []byte // pairscore/weights.json
}

// row is one example with its measurements.
type row struct {
	ex       *Example
	f        pairscore.Features
	mismatch bool // the views have a different number of windows
	contrast bool // the funnel's contrast guard holds the pair
}

// Run trains, evaluates and writes its report to w.
func Run(ctx context.Context, cfg Config, enc bench.Encoder, dim int, w io.Writer) (*Output, error) {
	exs, err := readAll(newViewer(), cfg.Upstream)
	if err != nil {
		return nil, err
	}
	docs, err := idfDocs(cfg.Upstream)
	if err != nil {
		return nil, err
	}
	idf := pairscore.BuildIDF(docs, cfg.MinDF)

	// Embed every window of every view.
	cache, err := OpenCache(cfg.CacheDir, enc, dim)
	if err != nil {
		return nil, err
	}
	windows := make([][2][]string, len(exs))
	var texts []string
	for i := range exs {
		for s, view := range []string{exs[i].A, exs[i].B} {
			ws, err := funnel.Windows(enc, view)
			if err != nil {
				return nil, err
			}
			windows[i][s] = ws
			texts = append(texts, ws...)
		}
	}
	vecs, err := cache.Embed(ctx, texts, cfg.Progress)
	if err != nil {
		return nil, err
	}
	byText := make(map[string][]float32, len(texts))
	for i, t := range texts {
		byText[t] = vecs[i]
	}
	rows := make([]row, len(exs))
	for i := range exs {
		ex := &exs[i]
		wa, wb := windows[i][0], windows[i][1]
		var cos []float64
		for k := range min(len(wa), len(wb)) {
			cos = append(cos, dot(byText[wa[k]], byText[wb[k]]))
		}
		p := pairscore.Pair{A: ex.A, B: ex.B, Cosines: cos}
		rows[i] = row{ex: ex, f: pairscore.Extract(idf, p), mismatch: len(wa) != len(wb), contrast: pairscore.Contrast(ex.A, ex.B) != ""}
		ex.Hard = !ex.Same && sharedShare(ex.A, ex.B) >= 0.5
	}

	if cfg.Dump != nil {
		if err := dump(cfg.Dump, rows); err != nil {
			return nil, err
		}
	}
	r := &reporter{w: w, rows: rows, idf: idf, cfg: cfg, enc: enc}
	r.data()
	all := fitted()
	lambda, err := r.chooseLambda(all)
	if err != nil {
		return nil, err
	}
	model, wts, err := r.fit(all, lambda)
	if err != nil {
		return nil, err
	}
	wts.Thresholds = r.thresholds(model)
	if model, err = pairscore.New(r.idf, wts); err != nil {
		return nil, err
	}
	r.weights(wts)
	r.evaluate(ctx, model, lambda)
	if err := r.traffic(ctx, model); err != nil {
		return nil, err
	}
	if err := r.ablation(ctx, lambda); err != nil {
		return nil, err
	}
	r.examples(model)
	if r.err != nil {
		return nil, r.err
	}
	var idfOut strings.Builder
	if _, err := idf.WriteTo(&idfOut); err != nil {
		return nil, err
	}
	return &Output{IDF: []byte(idfOut.String()), Weights: pairscore.MarshalWeights(wts)}, nil
}

// fitted are the features the model weighs: all but the length ratio,
// which adds nothing on Dev (the ablation shows it) and takes a weight of
// the wrong sign, a length difference counting for the same effect,
// from how the sources were made (BFCL's repeated questions with the
// function list appended, SGD's shortened re-confirmations), not from
// what a difference in length means.
func fitted() []int {
	var use []int
	for f := range pairscore.NumFeatures {
		if f != pairscore.FLengthRatio {
			use = append(use, f)
		}
	}
	return use
}

// readAll reads every labelled pair, sorted by source and id. A pair of
// Train or Dev that is also a Test pair (STS-B repeats a few MSRvid pairs
// between its train and dev files) is left out of Train and Dev.
func readAll(v *viewer, up string) ([]Example, error) {
	var exs []Example
	trainSplit := func(id string) Split { return splitOf("stsb/" + id) }
	for _, load := range []func() ([]Example, error){
		func() ([]Example, error) { return readSTSB(v, filepath.Join(up, "stsb", "sts-train.csv"), trainSplit) },
		func() ([]Example, error) {
			return readSTSB(v, filepath.Join(up, "stsb", "sts-dev.csv"), func(string) Split { return Test })
		},
		func() ([]Example, error) { return readSGDX(v, filepath.Join(up, "sgd", "sgd_x", "data")) },
		func() ([]Example, error) {
			return readSGDConfirms(v, filepath.Join(up, "sgd", "derived", "sgd_transactional_calls_train.jsonl"))
		},
		func() ([]Example, error) { return readBFCL(v, filepath.Join(up, "bfcl")) },
	} {
		got, err := load()
		if err != nil {
			return nil, err
		}
		exs = append(exs, got...)
	}
	tested := map[[2]string]bool{}
	for _, e := range exs {
		if e.Split == Test {
			tested[[2]string{e.A, e.B}], tested[[2]string{e.B, e.A}] = true, true
		}
	}
	exs = slices.DeleteFunc(exs, func(e Example) bool { return e.Split != Test && tested[[2]string{e.A, e.B}] })
	slices.SortStableFunc(exs, func(a, b Example) int {
		if c := strings.Compare(a.Source, b.Source); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return exs, nil
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range min(len(a), len(b)) {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// sharedShare is the share of the distinct lower-cased words of the
// shorter text's values that the other holds: the ≥ 50 % of the
// Quora-like held-out negatives.
func sharedShare(a, b string) float64 {
	set := func(view string) map[string]bool {
		m := map[string]bool{}
		lines := strings.Split(view, "\n")
		if len(lines) > 1 {
			lines = lines[1:]
		}
		for _, l := range lines {
			if _, v, ok := strings.Cut(l, ": "); ok {
				l = v
			}
			for _, w := range strings.FieldsFunc(strings.ToLower(l), func(r rune) bool {
				return !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r > 127)
			}) {
				m[w] = true
			}
		}
		return m
	}
	sa, sb := set(a), set(b)
	if len(sb) < len(sa) {
		sa, sb = sb, sa
	}
	if len(sa) == 0 {
		return 0
	}
	n := 0
	for w := range sa {
		if sb[w] {
			n++
		}
	}
	return float64(n) / float64(len(sa))
}

// reporter holds a run's rows and writes the report.
type reporter struct {
	w    io.Writer
	rows []row
	idf  *pairscore.IDF
	cfg  Config
	enc  bench.Encoder
	err  error
}

func (r *reporter) printf(format string, args ...any) {
	if r.err == nil {
		_, r.err = fmt.Fprintf(r.w, format, args...)
	}
}

func (r *reporter) table(write func(tw *tabwriter.Writer)) {
	tw := tabwriter.NewWriter(r.w, 0, 0, 2, ' ', tabwriter.AlignRight)
	write(tw)
	if err := tw.Flush(); err != nil && r.err == nil {
		r.err = err
	}
}

func (r *reporter) split(s Split) []int {
	var out []int
	for i := range r.rows {
		if r.rows[i].ex.Split == s {
			out = append(out, i)
		}
	}
	return out
}

func (r *reporter) data() {
	type key struct {
		src   string
		split Split
	}
	type cnt struct{ same, diff, hard int }
	counts := map[key]*cnt{}
	var keys []key
	for _, x := range r.rows {
		k := key{x.ex.Source, x.ex.Split}
		c := counts[k]
		if c == nil {
			c = &cnt{}
			counts[k] = c
			keys = append(keys, k)
		}
		switch {
		case x.ex.Same:
			c.same++
		case x.ex.Hard:
			c.hard++
			c.diff++
		default:
			c.diff++
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(string(a.split), string(b.split)); c != 0 {
			return -c // train, test, dev → train first
		}
		return strings.Compare(a.src, b.src)
	})
	r.printf("## Data\n\nIDF table: %d words (document frequency ≥ %d) over %d documents.\n\n", r.idf.Len(), r.cfg.MinDF, r.idf.Docs())
	r.table(func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "source\tsplit\tsame\tdifferent\tof them sharing ≥ 50 % of words\t")
		for _, k := range keys {
			c := counts[k]
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t\n", k.src, k.split, c.same, c.diff, c.hard)
		}
	})
	r.printf("\n")
}

// fit fits the features in use on Train.
func (r *reporter) fit(use []int, lambda float64) (*pairscore.Model, *pairscore.Weights, error) {
	tr := r.split(Train)
	fs := make([]pairscore.Features, len(tr))
	same := make([]bool, len(tr))
	wt := make([]float64, len(tr))
	// STS-B and the tool-call sources weigh the same in all, as in the
	// Dev objective.
	nSTSB := 0
	for _, i := range tr {
		if r.rows[i].ex.Source == "stsb" {
			nSTSB++
		}
	}
	for k, i := range tr {
		fs[k], same[k], wt[k] = r.rows[i].f, r.rows[i].ex.Same, 1
		if r.rows[i].ex.Source != "stsb" {
			wt[k] = float64(nSTSB) / float64(len(tr)-nSTSB)
		}
	}
	bias, w, err := fitLogistic(fs, same, wt, use, lambda)
	if err != nil {
		return nil, nil, err
	}
	wts := &pairscore.Weights{Encoder: r.enc.Name(), Bias: round6(bias),
		Note: fmt.Sprintf("logistic regression, L2 %g on standardized features, fitted on %d pairs by go run ./bench/cmd/pairtrain", lambda, len(tr))}
	for _, f := range use {
		wts.Features = append(wts.Features, pairscore.FeatureWeight{Name: pairscore.FeatureNames[f], Weight: round6(w[f])})
	}
	m, err := pairscore.New(r.idf, wts)
	return m, wts, err
}

// round6 rounds to the six decimals the weights file keeps, so that the
// model evaluated here is the one committed.
func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

func (r *reporter) probs(m *pairscore.Model, idx []int) ([]float64, []bool) {
	p := make([]float64, len(idx))
	same := make([]bool, len(idx))
	for k, i := range idx {
		p[k], same[k] = m.Prob(r.rows[i].f), r.rows[i].ex.Same
	}
	return p, same
}

// devParts are the two halves of the Dev objective: STS-B sentence pairs
// and the tool-call sources (BFCL, SGD), weighed equally so that neither
// kind of text decides alone.
func (r *reporter) devParts() (stsb, other []int) {
	for _, i := range r.split(Dev) {
		if r.rows[i].ex.Source == "stsb" {
			stsb = append(stsb, i)
		} else {
			other = append(other, i)
		}
	}
	return stsb, other
}

// devLoss is the Dev objective: the mean of the two parts' log loss.
func (r *reporter) devLoss(m *pairscore.Model) float64 {
	s, o := r.devParts()
	return (quality(r.probs(m, s)).LogLoss + quality(r.probs(m, o)).LogLoss) / 2
}

func (r *reporter) chooseLambda(use []int) (float64, error) {
	best, bestLoss := 0.0, math.Inf(1)
	r.printf("## Regularization (chosen on the Dev objective: mean log loss of Dev STS-B and Dev tool-call pairs)\n\n")
	r.table(func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "L2\tdev objective\tdev AUC\t")
		for _, l := range r.cfg.Lambdas {
			m, _, err := r.fit(use, l)
			if err != nil {
				r.err = err
				return
			}
			loss := r.devLoss(m)
			q := quality(r.probs(m, r.split(Dev)))
			fmt.Fprintf(tw, "%g\t%.4f\t%.4f\t\n", l, loss, q.AUC)
			if loss < bestLoss-1e-12 {
				best, bestLoss = l, loss
			}
		}
	})
	r.printf("\nchosen: %g\n\n", best)
	return best, r.err
}

// thresholds chooses the default probability thresholds on Dev: the
// duplicate threshold keeps today's Dev recall with the fewest false
// positives; the ambiguous one keeps the Dev recall of cosine ≥ 0.85; the
// replay one keeps Dev precision at pairscore.ReplayPrecision.
func (r *reporter) thresholds(m *pairscore.Model) pairscore.Thresholds {
	dev := r.split(Dev)
	p, same := r.probs(m, dev)
	amb := make([]bool, len(dev))
	for k, i := range dev {
		amb[k] = r.rows[i].f[pairscore.FCosine] >= 0.85
	}
	t := pairscore.Thresholds{
		Duplicate: round6(atRecall(p, same, r.todayPoint(dev).Recall()).Threshold),
		Ambiguous: round6(atRecall(p, same, rule(amb, same).Recall()).Threshold),
		Replay:    round6(math.Min(1, atPrecision(p, same, pairscore.ReplayPrecision).Threshold)),
	}
	t.Ambiguous = math.Min(t.Ambiguous, t.Duplicate)
	return t
}

func (r *reporter) weights(w *pairscore.Weights) {
	r.printf("## Weights (logit = bias + Σ weight · feature)\n\n")
	tr := r.split(Train)
	r.table(func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "feature\tweight\ttrain mean (same)\ttrain mean (different)\t")
		fmt.Fprintf(tw, "bias\t%.4f\t\t\t\n", w.Bias)
		for _, fw := range w.Features {
			f := slices.Index(pairscore.FeatureNames[:], fw.Name)
			var s, d, ns, nd float64
			for _, i := range tr {
				if r.rows[i].ex.Same {
					s += r.rows[i].f[f]
					ns++
				} else {
					d += r.rows[i].f[f]
					nd++
				}
			}
			fmt.Fprintf(tw, "%s\t%.4f\t%.3f\t%.3f\t\n", fw.Name, fw.Weight, s/ns, d/nd)
		}
	})
	r.printf("\n")
}

// today is the funnel's rule with the default policy and no judge: a
// cosine ≥ 0.9 is a duplicate unless the contrast guard holds it (or the
// views have a different number of windows); the ambiguous band falls
// back to execute.
func today(x *row) bool { return x.f[pairscore.FCosine] >= 0.9 && !x.contrast && !x.mismatch }

// slice names a set of rows to report on.
type slice struct {
	name string
	idx  []int
}

func (r *reporter) slices() []slice {
	dev, test := r.split(Dev), r.split(Test)
	var devSTSB, testHard []int
	for _, i := range dev {
		if r.rows[i].ex.Source == "stsb" {
			devSTSB = append(devSTSB, i)
		}
	}
	for _, i := range test {
		if r.rows[i].ex.Same || r.rows[i].ex.Hard {
			testHard = append(testHard, i)
		}
	}
	return []slice{
		{"dev (all sources)", dev},
		{"dev STS-B", devSTSB},
		{"dev tool calls (BFCL, SGD)", r.devOther()},
		{"test: STS-B dev, all pairs at the cut-offs", test},
		{"test: STS-B dev, negatives sharing ≥ 50 % of words", testHard},
	}
}

func (r *reporter) devOther() []int { _, o := r.devParts(); return o }

// devThresholds are the probabilities chosen on Dev: the one that keeps
// today's Dev recall (fewest false positives: the model's duplicate
// threshold), and the one that keeps today's Dev false-positive count
// (highest recall).
func (r *reporter) devThresholds(m *pairscore.Model) (keepRecall, keepFP float64) {
	dev := r.split(Dev)
	p, same := r.probs(m, dev)
	return m.Thresholds().Duplicate, atFP(p, same, r.todayPoint(dev).FP).Threshold
}

func (r *reporter) todayPoint(idx []int) Point {
	flag := make([]bool, len(idx))
	same := make([]bool, len(idx))
	for k, i := range idx {
		flag[k], same[k] = today(&r.rows[i]), r.rows[i].ex.Same
	}
	return rule(flag, same)
}

func (r *reporter) cosines(idx []int) []float64 {
	c := make([]float64, len(idx))
	for k, i := range idx {
		c[k] = r.rows[i].f[pairscore.FCosine]
	}
	return c
}

func (r *reporter) evaluate(_ context.Context, m *pairscore.Model, lambda float64) {
	tRecall, tFP := r.devThresholds(m)
	cosOnly, _, err := r.fit([]int{pairscore.FCosine}, lambda)
	if err != nil {
		r.err = err
		return
	}
	r.printf("## Quality of the probability\n\n")
	r.table(func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "slice\tpairs\tsame\tscorer AUC\tcosine AUC\tscorer log loss\tcosine-only LR log loss\tscorer ECE\t")
		for _, s := range r.slices() {
			p, same := r.probs(m, s.idx)
			q := quality(p, same)
			qc := quality(r.cosines(s.idx), same)
			pc, _ := r.probs(cosOnly, s.idx)
			qcl := quality(pc, same)
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t\n", s.name, q.N, q.Pos, q.AUC, qc.AUC, q.LogLoss, qcl.LogLoss, q.ECE)
		}
	})
	r.printf("\n## Operating points (flagged = the same effect)\n\n")
	r.printf("today: cosine ≥ 0.9 and no contrast (the default policy, no judge). Scorer thresholds fixed on Dev: p ≥ %.4f keeps today's Dev recall, p ≥ %.4f today's Dev false positives.\n\n", tRecall, tFP)
	r.table(func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "slice\trule\tthreshold\tTP\tFP\tFN\tTN\trecall\tprecision\t")
		for _, s := range r.slices() {
			p, same := r.probs(m, s.idx)
			c := r.cosines(s.idx)
			base := r.todayPoint(s.idx)
			row := func(name string, pt Point) {
				fmt.Fprintf(tw, "%s\t%s\t%.4f\t%d\t%d\t%d\t%d\t%.3f\t%.3f\t\n", s.name, name, pt.Threshold, pt.TP, pt.FP, pt.FN, pt.TN, pt.Recall(), pt.Precision())
			}
			row("today", base)
			comparisons(row, base, c, p, same, tRecall, tFP)
		}
	})
	r.printf("\n")
}

// comparisons writes the cosine alone and the scorer at today's recall
// and false-positive count, and the scorer at the thresholds fixed on Dev.
func comparisons(row func(string, Point), base Point, cos, prob []float64, same []bool, tRecall, tFP float64) {
	row("cosine alone, today's recall", atRecall(cos, same, base.Recall()))
	row("cosine alone, today's FP", atFP(cos, same, base.FP))
	row("scorer, today's recall", atRecall(prob, same, base.Recall()))
	row("scorer, today's FP", atFP(prob, same, base.FP))
	row("scorer, Dev threshold (recall)", at(prob, same, tRecall))
	row("scorer, Dev threshold (FP)", at(prob, same, tFP))
}

// traffic replays each traffic set through the funnel (default policies,
// no judge, a budget no embedding exceeds), checks that today's rule
// computed offline gives the funnel's decisions, and scores the same
// candidates with the scorer.
func (r *reporter) traffic(ctx context.Context, m *pairscore.Model) error {
	tRecall, tFP := r.devThresholds(m)
	for _, dir := range r.cfg.Traffic {
		set, err := bench.ReadDir(dir)
		if err != nil {
			return err
		}
		cfg := bench.DefaultConfig()
		cfg.Budget = time.Hour // the funnel's decision, whatever the machine's speed
		run, err := bench.Replay(ctx, cfg, r.enc, set)
		if err != nil {
			return err
		}
		a, err := bench.Analyze(ctx, r.enc, run)
		if err != nil {
			return err
		}
		a.UseScorer(m)
		var prob, cos []float64
		var same, funnelFlag, offline []bool
		agree := 0
		for i, e := range set.Events {
			if !a.Pool[i] || e.Truth == nil {
				continue
			}
			j := a.ProbOf[i]
			if j < 0 {
				continue
			}
			p, _ := a.Pair(i, j)
			sc := m.Score(p)
			prob = append(prob, sc.Prob)
			cos = append(cos, sc.Cosine)
			same = append(same, e.Truth.Expect == "duplicate")
			ff := run.Decisions[i].Flagged()
			of := sc.Cosine >= 0.9 && pairscore.Contrast(p.A, p.B) == "" && !a.Mismatch[i]
			funnelFlag = append(funnelFlag, ff)
			offline = append(offline, of)
			if ff == of {
				agree++
			}
		}
		base := rule(funnelFlag, same)
		r.printf("## Traffic set %s, replayed (default policies, no judge)\n\n", set.Name)
		r.printf("%d events decided by the semantic stage with an earlier candidate; today's rule computed offline agrees with the funnel's decision on %d of them.\n\n", len(prob), agree)
		r.table(func(tw *tabwriter.Writer) {
			fmt.Fprintln(tw, "rule\tthreshold\tduplicates caught\tdifferent texts flagged\trecall\tprecision\t")
			row := func(name string, pt Point) {
				fmt.Fprintf(tw, "%s\t%.4f\t%d/%d\t%d/%d\t%.3f\t%.3f\t\n", name, pt.Threshold, pt.TP, pt.TP+pt.FN, pt.FP, pt.FP+pt.TN, pt.Recall(), pt.Precision())
			}
			row("funnel today (replayed)", base)
			row("today's rule offline", rule(offline, same))
			comparisons(row, base, cos, prob, same, tRecall, tFP)
		})
		r.printf("\n")
	}
	return nil
}

// ablation refits without each feature and reports what it adds.
func (r *reporter) ablation(ctx context.Context, lambda float64) error {
	r.printf("## Ablation (each feature left out, refitted; test = STS-B dev)\n\n")
	test := r.split(Test)
	var hard []int
	for _, i := range test {
		if r.rows[i].ex.Same || r.rows[i].ex.Hard {
			hard = append(hard, i)
		}
	}
	base := r.todayPoint(test)
	baseHard := r.todayPoint(hard)
	r.table(func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "model\tdev log loss\tdev AUC\ttest AUC\ttest FP at today's recall\ttest recall at today's FP\thard FP at today's recall\thard recall at today's FP\t")
		variant := func(name string, use []int) {
			m, _, err := r.fit(use, lambda)
			if err != nil {
				r.err = err
				return
			}
			qd := quality(r.probs(m, r.split(Dev)))
			p, same := r.probs(m, test)
			qt := quality(p, same)
			ph, sh := r.probs(m, hard)
			fmt.Fprintf(tw, "%s\t%.4f\t%.4f\t%.4f\t%d\t%.3f\t%d\t%.3f\t\n", name, qd.LogLoss, qd.AUC, qt.AUC,
				atRecall(p, same, base.Recall()).FP, atFP(p, same, base.FP).Recall(),
				atRecall(ph, sh, baseHard.Recall()).FP, atFP(ph, sh, baseHard.FP).Recall())
		}
		all := fitted()
		variant("the model", all)
		variant("cosine only", []int{pairscore.FCosine})
		for f := range pairscore.NumFeatures {
			if !slices.Contains(all, f) {
				variant("with "+pairscore.FeatureNames[f], append(slices.Clone(all), f))
				continue
			}
			var use []int
			for _, g := range all {
				if g != f {
					use = append(use, g)
				}
			}
			variant("without "+pairscore.FeatureNames[f], use)
		}
	})
	r.printf("\n")
	return r.err
}

// Examples are the pairs: questions that differ in the one word
// that carries them, and a reworded duplicate. They are scored as the
// query of a search tool and the body of a comment.
var Examples = []struct {
	A, B string
	Same bool
}{
	{"How is the word 'anachronism' used in sentences?", "How is the word 'mischievous' used in sentences?", false},
	{"What is the best site for learning algorithms?", "What is the best site for learning programming?", false},
	{"What is the word equation for cell respiration?", "What is the word equation for aerobic respiration?", false},
	{"How is capital gains tax calculated for a financial year?", "How is capital gains tax calculated for a financial year in India?", false},
	{"reset my password", "I need to change my password", true},
}

func (r *reporter) examples(m *pairscore.Model) {
	r.printf("## The issue's examples\n\n")
	v := newViewer()
	r.table(func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "A\tB\tas\tcosine\tp(same)\tdiffers\t")
		for _, ex := range Examples {
			for _, as := range [][2]string{{"search", "query"}, {"add_issue_comment", "body"}} {
				a, err := v.view(as[0], as[1], ex.A)
				if err != nil {
					r.err = err
					return
				}
				b, err := v.view(as[0], as[1], ex.B)
				if err != nil {
					r.err = err
					return
				}
				vs, err := r.enc.Embed(context.Background(), []string{a, b})
				if err != nil {
					r.err = err
					return
				}
				s := m.Score(pairscore.Pair{A: a, B: b, Cosines: []float64{dot(vs[0], vs[1])}})
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.4f\t%.4f\t%s\t\n", ex.A, ex.B, as[1], s.Cosine, s.Prob, strings.Join(s.Differs, "; "))
			}
		}
	})
	r.printf("\n")
}

// dump writes the rows as TSV: labels, features, the two views.
func dump(w io.Writer, rows []row) error {
	var b strings.Builder
	b.WriteString("source\tsplit\tid\tsame\thard\tmismatch\tcontrast")
	for _, n := range pairscore.FeatureNames {
		b.WriteString("\t" + n)
	}
	b.WriteString("\ta\tb\n")
	esc := strings.NewReplacer("\t", " ", "\n", "⏎")
	for _, x := range rows {
		fmt.Fprintf(&b, "%s\t%s\t%s\t%v\t%v\t%v\t%v", x.ex.Source, x.ex.Split, x.ex.ID, x.ex.Same, x.ex.Hard, x.mismatch, x.contrast)
		for _, f := range x.f {
			fmt.Fprintf(&b, "\t%.6f", f)
		}
		fmt.Fprintf(&b, "\t%s\t%s\n", esc.Replace(x.ex.A), esc.Replace(x.ex.B))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
