package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idem-dev/idem/funnel"
)

// Report is the score of one run, as report.json holds it.
type Report struct {
	Set      string          `json:"set"`
	Events   int             `json:"events"`
	Labelled bool            `json:"labelled"`
	Mode     string          `json:"mode"`
	BudgetMS float64         `json:"budget_ms"`
	Policies []funnel.Policy `json:"policies"`

	Overall  Metrics            `json:"overall"`
	ByStage  map[string]Metrics `json:"by_stage"`
	ByTool   map[string]Metrics `json:"by_tool"`
	ByPolicy map[string]Metrics `json:"by_action_type"`
	ByTag    map[string]Metrics `json:"by_tag"`
	// Decisions counts decisions by "decision/stage".
	Decisions map[string]int     `json:"decisions"`
	Latency   map[string]Latency `json:"latency"`

	Baseline BaselineReport `json:"baseline"`
	Sweep    Sweep          `json:"sweep"`
	// Histograms are, per tool, the similarities of each event's nearest
	// earlier call, for true duplicates and for distinct calls.
	Histograms []Histogram   `json:"histograms"`
	Results    []EventResult `json:"events_detail"`
	Review     []ReviewPair  `json:"-"`
	Analysis   *Analysis     `json:"-"`
	// Reads counts, per read-only tool, the reads answered from an earlier
	// one (replayed: a semantic cache's hits, across sessions under a
	// tenant scope).
	Reads map[string]ReadHits `json:"reads,omitempty"`
}

// BaselineReport scores the whole-call-embedding baseline.
type BaselineReport struct {
	Threshold float64 `json:"threshold"`
	// Flagged counts the events the baseline flags (its hit rate, for
	// unlabelled traffic).
	Flagged int                `json:"flagged"`
	Overall Metrics            `json:"overall"`
	ByTool  map[string]Metrics `json:"by_tool"`
	ByTag   map[string]Metrics `json:"by_tag"`
}

// Sweep is precision and recall against a threshold: for the funnel, every
// semantic policy's duplicate threshold set to it (estimated offline, see
// Analysis); for the baseline, its single threshold.
type Sweep struct {
	Thresholds []float64 `json:"thresholds"`
	Funnel     []PR      `json:"funnel"`
	Baseline   []PR      `json:"baseline"`
}

// PR is a precision and recall over labelled events (nil when undefined).
type PR struct {
	Precision *float64 `json:"precision"`
	Recall    *float64 `json:"recall"`
}

// Histogram holds one tool's similarities.
type Histogram struct {
	Tool               string    `json:"tool"`
	Policy             string    `json:"policy"`
	DuplicateThreshold float64   `json:"duplicate_threshold"`
	AmbiguousThreshold float64   `json:"ambiguous_threshold"`
	Duplicates         []float64 `json:"duplicates"`
	Distinct           []float64 `json:"distinct"`
}

// EventResult is one event's decision and score.
type EventResult struct {
	Decision
	Tool    string  `json:"tool"`
	Expect  string  `json:"expect,omitempty"`
	Outcome string  `json:"outcome,omitempty"` // tp, fp, fn, tn
	Nearest float64 `json:"nearest,omitempty"`
	// NearestLine is the line of the nearest earlier call (0: none).
	NearestLine int    `json:"nearest_line,omitempty"`
	Baseline    string `json:"baseline,omitempty"` // tp, fp, fn, tn
}

// ReviewPair is a borderline pair for a person to label (unlabelled
// traffic).
type ReviewPair struct {
	Line        int             `json:"line"`
	EarlierLine int             `json:"earlier_line"`
	Tool        string          `json:"tool"`
	Similarity  float64         `json:"similarity"`
	Decision    string          `json:"decision"`
	Stage       string          `json:"stage"`
	Arguments   json.RawMessage `json:"arguments"`
	Earlier     json.RawMessage `json:"earlier_arguments"`
	Label       *string         `json:"label"` // for the reviewer: "duplicate" or "distinct"
}

func outcome(e *Event, flagged bool) string {
	if e.Truth == nil {
		return ""
	}
	switch dup := e.Truth.Expect == "duplicate"; {
	case dup && flagged:
		return "tp"
	case dup:
		return "fn"
	case flagged:
		return "fp"
	}
	return "tn"
}

// ReadHits are a read-only tool's reads and those replayed.
type ReadHits struct {
	Reads    int `json:"reads"`
	Replayed int `json:"replayed"`
}

// Score scores an analysed run.
func Score(a *Analysis) *Report {
	run := a.Run
	set := run.Set
	cfg := run.Config
	r := &Report{
		Set: set.Name, Events: len(set.Events), Labelled: set.Labelled(),
		Mode: "in-process, virtual time", BudgetMS: float64(cfg.Budget) / float64(time.Millisecond),
		Policies: run.Policies, Decisions: map[string]int{}, Analysis: a,
	}
	if cfg.RealTime {
		r.Mode = "in-process, real time"
	}
	var overall Counts
	stages, tools, pols, tags := group{}, group{}, group{}, group{}
	samples := map[string][]int64{}
	bflags, _ := a.BaselineFlags(cfg.BaselineThreshold)
	var bover Counts
	btools, btags := group{}, group{}
	for i := range set.Events {
		e := &set.Events[i]
		d := &run.Decisions[i]
		errored := d.Err != ""
		flagged := d.Flagged()
		overall.add(e, flagged, errored)
		stage := d.Stage
		if errored {
			stage = "error"
		}
		stages.add(stage, e, flagged, errored)
		tools.add(e.Tool, e, flagged, errored)
		pols.add(a.Policy[i].Name, e, flagged, errored)
		if p := a.Policy[i]; !errored && p.ReadOnly != nil && *p.ReadOnly || !errored && e.HasTag("read") {
			h := r.Reads[e.Tool]
			h.Reads++
			if d.Decision == "duplicate" {
				h.Replayed++
			}
			if r.Reads == nil {
				r.Reads = map[string]ReadHits{}
			}
			r.Reads[e.Tool] = h
		}
		for _, t := range e.Tags {
			tags.add(t, e, flagged, errored)
		}
		if !errored {
			r.Decisions[d.Decision+"/"+d.Stage]++
			for k, v := range d.TimingsUS {
				samples[k] = append(samples[k], v)
			}
		}
		berr := a.whole[i] == nil
		bover.add(e, bflags[i], berr)
		btools.add(e.Tool, e, bflags[i], berr)
		for _, t := range e.Tags {
			btags.add(t, e, bflags[i], berr)
		}
		er := EventResult{Decision: *d, Tool: e.Tool, Outcome: outcome(e, flagged), Baseline: outcome(e, bflags[i])}
		if e.Truth != nil {
			er.Expect = e.Truth.Expect
		}
		if j := a.BestOf[i]; j >= 0 {
			er.Nearest, er.NearestLine = a.Best[i], set.Events[j].Line
		}
		if errored {
			er.Outcome, er.Baseline = "", ""
		}
		r.Results = append(r.Results, er)
	}
	r.Overall = overall.Metrics()
	r.ByStage, r.ByTool, r.ByPolicy, r.ByTag = stages.metrics(), tools.metrics(), pols.metrics(), tags.metrics()
	r.Latency = map[string]Latency{}
	for k, v := range samples {
		r.Latency[k] = latencyOf(v, cfg.Budget, k == "total")
	}
	r.Baseline = BaselineReport{Threshold: cfg.BaselineThreshold, Overall: bover.Metrics(), ByTool: btools.metrics(), ByTag: btags.metrics()}
	for i, f := range bflags {
		if f && a.whole[i] != nil {
			r.Baseline.Flagged++
		}
	}
	r.Sweep = sweep(a)
	r.Histograms = histograms(a)
	r.Review = review(a)
	return r
}

// fixedFlag is the replay's own decision for events the thresholds do not
// move.
func sweep(a *Analysis) Sweep {
	var s Sweep
	set := a.Run.Set
	for t := 0.50; t <= 1.0001; t += 0.01 {
		t = math.Round(t*100) / 100
		s.Thresholds = append(s.Thresholds, t)
		var fc Counts
		for i := range set.Events {
			e := &set.Events[i]
			d := &a.Run.Decisions[i]
			if d.Err != "" || e.Truth == nil {
				continue
			}
			flagged := d.Flagged()
			if a.Pool[i] {
				p := a.Policy[i]
				flagged = a.flagAt(i, p, t, math.Min(p.AmbiguousThreshold, t))
			}
			fc.add(e, flagged, false)
		}
		fm := fc.Metrics()
		s.Funnel = append(s.Funnel, PR{fm.Precision, fm.Recall})
		bf, _ := a.BaselineFlags(t)
		var bc Counts
		for i := range set.Events {
			if a.whole[i] == nil || set.Events[i].Truth == nil {
				continue
			}
			bc.add(&set.Events[i], bf[i], false)
		}
		bm := bc.Metrics()
		s.Baseline = append(s.Baseline, PR{bm.Precision, bm.Recall})
	}
	return s
}

func histograms(a *Analysis) []Histogram {
	by := map[string]*Histogram{}
	set := a.Run.Set
	for i := range set.Events {
		e := &set.Events[i]
		if !a.Pool[i] || e.Truth == nil || math.IsNaN(a.Best[i]) {
			continue
		}
		h := by[e.Tool]
		if h == nil {
			p := a.Policy[i]
			h = &Histogram{Tool: e.Tool, Policy: p.Name, DuplicateThreshold: p.DuplicateThreshold, AmbiguousThreshold: p.AmbiguousThreshold}
			by[e.Tool] = h
		}
		if e.Truth.Expect == "duplicate" {
			h.Duplicates = append(h.Duplicates, a.Best[i])
		} else {
			h.Distinct = append(h.Distinct, a.Best[i])
		}
	}
	out := make([]Histogram, 0, len(by))
	for _, h := range by {
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool {
		ni, nj := len(out[i].Duplicates)+len(out[i].Distinct), len(out[j].Duplicates)+len(out[j].Distinct)
		if ni != nj {
			return ni > nj
		}
		return out[i].Tool < out[j].Tool
	})
	return out
}

// review lists the borderline pairs: nearest earlier calls within 0.10
// below the ambiguous threshold to 0.05 above the duplicate threshold.
func review(a *Analysis) []ReviewPair {
	var out []ReviewPair
	set := a.Run.Set
	for i := range set.Events {
		j := a.BestOf[i]
		if j < 0 {
			continue
		}
		p := a.Policy[i]
		s := a.Best[i]
		if s < p.AmbiguousThreshold-0.10 || s >= p.DuplicateThreshold+0.05 {
			continue
		}
		d := &a.Run.Decisions[i]
		out = append(out, ReviewPair{
			Line: set.Events[i].Line, EarlierLine: set.Events[j].Line, Tool: set.Events[i].Tool,
			Similarity: math.Round(s*1e4) / 1e4, Decision: d.Decision, Stage: d.Stage,
			Arguments: set.Events[i].Arguments, Earlier: set.Events[j].Arguments,
		})
	}
	return out
}

// WriteJSON writes the report as report.json.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// WriteReview writes the borderline pairs, one JSON object a line.
func (r *Report) WriteReview(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := range r.Review {
		if err := enc.Encode(&r.Review[i]); err != nil {
			return err
		}
	}
	return nil
}

func pct(p *float64) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("%.3f", *p)
}

// WriteText writes the compact terminal table.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "set %s: %d events (%s), %s, budget %g ms\n\n", r.Set, r.Events, labelled(r), r.Mode, r.BudgetMS)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "slice\tevents\tTP\tFP\tFN\tTN\tprecision\trecall\tF1\thard-neg FP\t")
	row := func(name string, m Metrics) {
		hn := "–"
		if m.HardNeg > 0 {
			hn = fmt.Sprintf("%d/%d %s", m.HardNegFP, m.HardNeg, pct(m.HardNegFPRate))
		}
		extra := ""
		if m.Errors > 0 {
			extra = fmt.Sprintf(" (%d errors)", m.Errors)
		}
		fmt.Fprintf(tw, "%s%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n", name, extra, m.Events, m.TP, m.FP, m.FN, m.TN,
			pct(m.Precision), pct(m.Recall), pct(m.F1), hn)
	}
	row("funnel overall", r.Overall)
	row(fmt.Sprintf("baseline (cos ≥ %.2f)", r.Baseline.Threshold), r.Baseline.Overall)
	if m, ok := r.ByTag["write"]; ok {
		row("funnel write", m)
		row("baseline write", r.Baseline.ByTag["write"])
	}
	for _, k := range sortedKeys(r.ByStage) {
		row("stage "+k, r.ByStage[k])
	}
	for _, k := range sortedKeys(r.ByPolicy) {
		row("action type "+k, r.ByPolicy[k])
	}
	for _, k := range sortedKeys(r.ByTag) {
		row("tag "+k, r.ByTag[k])
	}
	tools := sortedKeys(r.ByTool)
	const maxTools = 15
	for i, k := range tools {
		if i == maxTools {
			fmt.Fprintf(tw, "(%d more tools in report.json)\t\t\t\t\t\t\t\t\t\t\n", len(tools)-maxTools)
			break
		}
		row("tool "+k, r.ByTool[k])
	}
	tw.Flush()
	if len(r.Reads) > 0 {
		fmt.Fprintf(&b, "\nreads answered from an earlier read (a semantic cache's hit rate)\n")
		for _, k := range sortedKeys(r.Reads) {
			h := r.Reads[k]
			fmt.Fprintf(&b, "  %s: %d of %d = %.3f\n", k, h.Replayed, h.Reads, float64(h.Replayed)/float64(h.Reads))
		}
	}
	fmt.Fprintf(&b, "\nlatency (µs)\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "stage\tn\tp50\tp95\tp99\tmax\tover %g ms\t\n", r.BudgetMS)
	for _, k := range sortedKeys(r.Latency) {
		l := r.Latency[k]
		over := ""
		if k == "total" {
			over = fmt.Sprint(l.OverBudget)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n", k, l.N, l.P50, l.P95, l.P99, l.Max, over)
	}
	tw.Flush()
	if !r.Labelled {
		fmt.Fprintf(&b, "\ndecisions (decision/stage)\n")
		for _, k := range sortedKeys(r.Decisions) {
			fmt.Fprintf(&b, "  %-28s %6d  %5.1f%%\n", k, r.Decisions[k], 100*float64(r.Decisions[k])/float64(max(1, r.Events)))
		}
		fmt.Fprintf(&b, "baseline (cos ≥ %.2f) would flag %d (%.1f%%)\n", r.Baseline.Threshold, r.Baseline.Flagged, 100*float64(r.Baseline.Flagged)/float64(max(1, r.Events)))
		fmt.Fprintf(&b, "borderline pairs for review: %d\n", len(r.Review))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func labelled(r *Report) string {
	if r.Labelled {
		return "labelled"
	}
	n := r.Overall.Events - r.Overall.Unlabelled
	return fmt.Sprintf("%d labelled", n)
}
