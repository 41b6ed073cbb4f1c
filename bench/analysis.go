package bench

import (
	"context"
	"fmt"
	"math"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/pairscore"
)

// Analysis holds what the thresholds act on, computed once per run so
// that calibration and the charts can sweep thresholds offline:
// for each event, the similarity of its nearest earlier call as the
// funnel's semantic stage compares them, and the baseline's whole-call
// embeddings.
//
// The nearest earlier call is looked for among the calls the replay
// executed in the same session with the same tool and a different base
// key, whose failure (if any) was not yet reported, that pass the
// policy's identity gate; texts are compared window by window as the
// funnel does. Which calls were executed is taken from the replay at the
// thresholds it ran with; at other thresholds a few more or fewer earlier
// calls would be candidates, so a sweep is an estimate. The negation
// guard of the funnel is not modelled. A holdout replay (calibrate
// --holdout) measures the chosen thresholds exactly.
type Analysis struct {
	Run *Run
	// Best is the similarity of each event's nearest earlier call (NaN
	// when it has none); BestOf is that call's event index (-1).
	Best   []float64
	BestOf []int
	// Mismatch: the two text views have a different number of windows;
	// the funnel holds such pairs below the duplicate threshold.
	Mismatch []bool
	// Pool: the event's decision depends on its policy's thresholds (it
	// has text, its policy is semantic, and no key or exact match decided).
	Pool []bool
	// Policy is the policy that applied to each event.
	Policy []*funnel.Policy
	// Prob, after UseScorer, is the pair scorer's probability that each
	// event asks for the same effect as its likeliest earlier call (NaN
	// when it has none), and ProbOf that call's event index (-1); nil
	// before. With them the thresholds are probabilities.
	Prob   []float64
	ProbOf []int
	// Scorer names the scorer's encoder after UseScorer ("" before).
	Scorer string

	calls []*canon.Call
	whole [][]float32   // baseline: the whole canonical call's embedding
	emb   [][][]float32 // each event's text windows
	cands [][]int       // each event's candidates (earlier calls that passed the gate)

	probMismatch []bool // Mismatch for ProbOf's candidate
	// probDefaults are the scorer's own thresholds, for a policy that
	// sets no probabilities (see own).
	probDefaults pairscore.Thresholds
}

// Analyze computes the analysis of run, embedding what the replay did not.
func Analyze(ctx context.Context, enc Encoder, run *Run) (*Analysis, error) {
	set := run.Set
	n := len(set.Events)
	a := &Analysis{
		Run: run, Best: make([]float64, n), BestOf: make([]int, n), Mismatch: make([]bool, n),
		Pool: make([]bool, n), Policy: make([]*funnel.Policy, n), calls: make([]*canon.Call, n),
		whole: make([][]float32, n), cands: make([][]int, n),
	}
	ccfg := canon.DefaultConfig()
	ccfg.Tools, _ = ToolConfig(set.Tools)
	cn, err := canon.New(ccfg)
	if err != nil {
		return nil, err
	}
	byName := map[string]*funnel.Policy{}
	for i := range run.Policies {
		byName[run.Policies[i].Name] = &run.Policies[i]
	}
	def := funnel.DefaultPolicy()
	vecs := run.vecs
	if vecs == nil {
		vecs = map[string][]float32{}
	}
	windows := make([][]string, n)
	var need []string
	needSet := map[string]bool{}
	want := func(t string) {
		if _, ok := vecs[t]; !ok && !needSet[t] {
			needSet[t] = true
			need = append(need, t)
		}
	}
	for i := range set.Events {
		e := &set.Events[i]
		a.Best[i], a.BestOf[i] = math.NaN(), -1
		p := byName[run.Decisions[i].Policy]
		if p == nil {
			p = &def
		}
		a.Policy[i] = p
		call, err := cn.CanonicalizeOn(e.Tool, e.Arguments, e.Today)
		if err != nil {
			continue // the check failed too; the event is not scored
		}
		a.calls[i] = call
		want(wholeText(call))
		if call.HasText() {
			if windows[i], err = funnel.Windows(enc, call.TextView()); err != nil {
				return nil, err
			}
			for _, w := range windows[i] {
				want(w)
			}
		}
	}
	for start := 0; start < len(need); start += 64 {
		batch := need[start:min(start+64, len(need))]
		v, err := enc.Embed(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("bench: embed %d texts: %w", len(batch), err)
		}
		for j, t := range batch {
			vecs[t] = v[j]
		}
	}
	emb := make([][][]float32, n)
	a.emb = emb
	for i := range set.Events {
		if a.calls[i] == nil {
			continue
		}
		a.whole[i] = vecs[wholeText(a.calls[i])]
		for _, w := range windows[i] {
			emb[i] = append(emb[i], vecs[w])
		}
	}
	bases := make([]string, n)
	for i := range set.Events {
		e := &set.Events[i]
		bases[i], _ = ledger.KeyFor(ledger.KeyInput{IdempotencyKey: e.Key, Workflow: e.Workflow, Step: e.Step, Tool: e.Tool})
	}
	// Earlier executed calls by scope and tool.
	executed := map[string][]int{}
	for i := range set.Events {
		e := &set.Events[i]
		d := &run.Decisions[i]
		call := a.calls[i]
		if call == nil || d.Err != "" {
			continue
		}
		p := a.Policy[i]
		scope := e.Tenant + "\x00" + e.Session + "\x00" + e.Tool
		switch d.Stage {
		case "semantic", "judge", "new":
			a.Pool[i] = call.HasText() && p.Semantic
		}
		if call.HasText() && p.Semantic {
			for _, j := range executed[scope] {
				c := &set.Events[j]
				if bases[j] == bases[i] || run.Decisions[j].Key == d.Key {
					continue
				}
				if f := run.FailedAt[j]; f >= 0 && f <= e.TMS {
					continue
				}
				if p.Window > 0 && (e.TMS-c.TMS) > p.Window.Milliseconds() {
					continue
				}
				if p.IdentityGate && a.calls[j].IdentityDigest != call.IdentityDigest {
					continue
				}
				if !a.calls[j].HasText() {
					continue
				}
				a.cands[i] = append(a.cands[i], j)
				s, mismatch := compareWindows(emb[i], emb[j])
				if a.BestOf[i] < 0 || s > a.Best[i] {
					a.Best[i], a.BestOf[i], a.Mismatch[i] = s, j, mismatch
				}
			}
		}
		if d.Decision == "execute" {
			executed[scope] = append(executed[scope], i)
		}
	}
	return a, nil
}

// UseScorer scores every pool event against each of its candidates with
// m and keeps the likeliest (Prob, ProbOf): the thresholds the analysis
// is swept over become probabilities. Pairs of views with a different
// number of windows are scored on their aligned windows and stay marked
// in Mismatch (for the candidate with the highest cosine; the funnel
// holds them below the duplicate threshold).
func (a *Analysis) UseScorer(m *pairscore.Model) {
	n := len(a.Best)
	a.Prob, a.ProbOf, a.Scorer = make([]float64, n), make([]int, n), m.Encoder()
	a.probDefaults = m.Thresholds()
	a.probMismatch = make([]bool, n)
	for i := range n {
		a.Prob[i], a.ProbOf[i] = math.NaN(), -1
		for _, j := range a.cands[i] {
			p, _ := a.ScorePair(m, i, j)
			if a.ProbOf[i] < 0 || p.Prob > a.Prob[i] {
				a.Prob[i], a.ProbOf[i] = p.Prob, j
				a.probMismatch[i] = len(a.emb[i]) != len(a.emb[j])
			}
		}
	}
}

// own returns the duplicate and ambiguous thresholds policy p decides
// with, on the scale of score, as the funnel reads them
// (funnel.Policy.Thresholds).
func (a *Analysis) own(p *funnel.Policy) (dup, amb float64) {
	if a.Prob == nil {
		return p.Thresholds(nil)
	}
	return p.Thresholds(&a.probDefaults)
}

// score is what the thresholds act on for event i: the scorer's
// probability after UseScorer, else the nearest cosine; mismatch as
// Mismatch, for that candidate.
func (a *Analysis) score(i int) (s float64, mismatch bool) {
	if a.Prob != nil {
		return a.Prob[i], a.probMismatch[i]
	}
	return a.Best[i], a.Mismatch[i]
}

// ScorePair scores event i against event j as the funnel would compare
// them: their text views and the cosines of their aligned windows. ok is
// false when either has no text.
func (a *Analysis) ScorePair(m *pairscore.Model, i, j int) (s pairscore.Score, ok bool) {
	p, ok := a.Pair(i, j)
	if !ok {
		return pairscore.Score{}, false
	}
	return m.Score(p), true
}

// Pair is the scorer's input for events i and j: their text views and the
// cosines of their aligned windows.
func (a *Analysis) Pair(i, j int) (pairscore.Pair, bool) {
	ci, cj := a.calls[i], a.calls[j]
	if ci == nil || cj == nil || !ci.HasText() || !cj.HasText() {
		return pairscore.Pair{}, false
	}
	n := min(len(a.emb[i]), len(a.emb[j]))
	cos := make([]float64, n)
	for k := range n {
		cos[k] = dot(a.emb[i][k], a.emb[j][k])
	}
	return pairscore.Pair{A: cj.TextView(), B: ci.TextView(), Cosines: cos}, true
}

// wholeText is what the baseline embeds: the tool name and the canonical
// JSON of the arguments.
func wholeText(c *canon.Call) string { return c.Tool + " " + string(c.Canonical) }

// compareWindows is the funnel's comparison: the lowest cosine over
// aligned windows; mismatch reports a different number of windows.
func compareWindows(a, b [][]float32) (float64, bool) {
	n := min(len(a), len(b))
	sim := 1.0
	for i := range n {
		sim = math.Min(sim, dot(a[i], b[i]))
	}
	return sim, len(a) != len(b)
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range min(len(a), len(b)) {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// flagAt reports whether a pool event would be flagged with its policy's
// thresholds replaced by dup and amb (no judge: the ambiguous band goes
// to the fallback). After UseScorer the thresholds are probabilities.
func (a *Analysis) flagAt(i int, p *funnel.Policy, dup, amb float64) bool {
	s, mismatch := a.score(i)
	if math.IsNaN(s) {
		return false
	}
	sd := s
	if mismatch {
		sd = math.Min(s, math.Nextafter(dup, 0))
	}
	if sd >= dup {
		return p.OnDuplicate != funnel.ActionWarn
	}
	return p.Fallback == funnel.FallbackConfirm && s >= amb
}

// BaselineFlags simulates the baseline at threshold t: per session, a
// cache of whole-call embeddings of calls that ran and succeeded (added
// when their result arrives, at t_ms + after_ms); an event whose best
// cosine with the cache is at least t is flagged (a cache hit), otherwise
// it runs. best holds each event's best cosine (NaN with an empty cache).
func (a *Analysis) BaselineFlags(t float64) (flags []bool, best []float64) {
	set := a.Run.Set
	type cached struct {
		v  []float32
		at int64
	}
	cache := map[string][]cached{}
	flags = make([]bool, len(set.Events))
	best = make([]float64, len(set.Events))
	for i := range set.Events {
		e := &set.Events[i]
		best[i] = math.NaN()
		if a.whole[i] == nil {
			continue
		}
		scope := e.Tenant + "\x00" + e.Session
		for _, c := range cache[scope] {
			if c.at > e.TMS {
				continue
			}
			if s := dot(a.whole[i], c.v); math.IsNaN(best[i]) || s > best[i] {
				best[i] = s
			}
		}
		flags[i] = !math.IsNaN(best[i]) && best[i] >= t
		if !flags[i] && (e.Outcome == nil || e.Outcome.Status == "success") {
			at := e.TMS
			if e.Outcome != nil {
				at += e.Outcome.AfterMS
			}
			cache[scope] = append(cache[scope], cached{v: a.whole[i], at: at})
		}
	}
	return flags, best
}
