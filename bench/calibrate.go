package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/goccy/go-yaml"

	"github.com/idem-dev/idem/funnel"
)

// CalibrateConfig configures Calibrate. Start from DefaultCalibrateConfig.
type CalibrateConfig struct {
	// WriteTarget and ReadTarget are the precision each action type must
	// keep: write types (every policy not marked read_only) and read-only
	// ones.
	WriteTarget float64
	ReadTarget  float64
	// AmbiguousTarget is the precision the ambiguous band must keep for a
	// judge to be worth asking: the ambiguous threshold is lowered from
	// the duplicate threshold while the calls at or above it are
	// duplicates at least this often, by at most MaxBand.
	AmbiguousTarget float64
	MaxBand         float64
	// ReplayTarget is the precision a read-only type's free-text matches
	// must keep to replay: semantic_replay is the lowest threshold at
	// which they do (see TypeCalibration.SemanticReplay).
	ReplayTarget float64
	// Step and Lowest define the grid of thresholds swept; ProbLowest
	// replaces Lowest when the thresholds are the pair scorer's
	// probabilities (Analysis.UseScorer).
	Step, Lowest, ProbLowest float64
	// ByTool gives every tool with at least MinPool threshold-dependent
	// events its own policy (named after it), ahead of the others.
	ByTool  bool
	MinPool int
}

// DefaultCalibrateConfig returns precision targets of 0.99 for write
// actions and 0.95 for read-only ones, 0.99 for a read's free-text
// replay, an ambiguous band kept at precision 0.5 and at most 0.15 wide,
// a grid of 0.005 from 0.5 to 1 (from 0.05 for probabilities), one policy
// per action type.
func DefaultCalibrateConfig() CalibrateConfig {
	return CalibrateConfig{
		WriteTarget: 0.99, ReadTarget: 0.95, ReplayTarget: 0.99, AmbiguousTarget: 0.5, MaxBand: 0.15,
		Step: 0.005, Lowest: 0.5, ProbLowest: 0.05, MinPool: 10,
	}
}

// Validate reports what is wrong with c.
func (c CalibrateConfig) Validate() error {
	var errs []error
	for name, v := range map[string]float64{"write_target": c.WriteTarget, "read_target": c.ReadTarget, "replay_target": c.ReplayTarget, "ambiguous_target": c.AmbiguousTarget} {
		if v <= 0 || v > 1 {
			errs = append(errs, fmt.Errorf("%s: %v not in (0, 1]", name, v))
		}
	}
	if c.Step <= 0 || c.Step > 0.1 {
		errs = append(errs, fmt.Errorf("step: %v not in (0, 0.1]", c.Step))
	}
	if c.Lowest <= 0 || c.Lowest >= 1 {
		errs = append(errs, fmt.Errorf("lowest: %v not in (0, 1)", c.Lowest))
	}
	if c.ProbLowest <= 0 || c.ProbLowest >= 1 {
		errs = append(errs, fmt.Errorf("prob_lowest: %v not in (0, 1)", c.ProbLowest))
	}
	if c.MaxBand < 0 || c.MaxBand >= 1 {
		errs = append(errs, fmt.Errorf("max_band: %v not in [0, 1)", c.MaxBand))
	}
	if c.MinPool < 1 {
		errs = append(errs, errors.New("min_pool: must be at least 1"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("bench calibrate config: %w", errors.Join(errs...))
	}
	return nil
}

// TypeCalibration is the chosen setting of one action type and what it
// is expected to give.
type TypeCalibration struct {
	Name string `json:"name"`
	// Tool is set for a type of one tool's own (CalibrateConfig.ByTool).
	Tool   string  `json:"tool,omitempty"`
	Write  bool    `json:"write"`
	Target float64 `json:"precision_target"`
	// Pool counts the type's labelled events the thresholds decide;
	// PoolDuplicates those expected to be duplicates.
	Pool           int `json:"pool"`
	PoolDuplicates int `json:"pool_duplicates"`

	DuplicateThreshold float64 `json:"duplicate_threshold"`
	AmbiguousThreshold float64 `json:"ambiguous_threshold"`
	// Met is false when no threshold reaches the target; the duplicate
	// threshold is then 1 (identical text only).
	Met bool `json:"target_met"`
	// Expected scores every labelled event of the type at the chosen
	// thresholds with no judge; Semantic only the pool.
	Expected Metrics `json:"expected"`
	Semantic Metrics `json:"expected_semantic"`
	// JudgeCeiling is the recall a judge that is always right about the
	// ambiguous band would reach.
	JudgeCeiling *float64 `json:"judge_ceiling_recall"`
	// Holdout is the replayed score on the holdout set, when there is one.
	Holdout *Metrics `json:"holdout,omitempty"`
	// SemanticReplay, for a read-only type, is the threshold at or above
	// which a read's match that rests on free-text similarity replays: the
	// lowest that keeps the precision of those matches at ReplayTarget,
	// with the highest recall. Nil when none does (or the set has no
	// such duplicates): such reads execute. Replay scores those matches
	// at it.
	SemanticReplay *float64 `json:"semantic_replay,omitempty"`
	Replay         *Metrics `json:"expected_replay,omitempty"`
}

// Calibration is the outcome of Calibrate.
type Calibration struct {
	Set      string            `json:"set"`
	Config   CalibrateConfig   `json:"config"`
	Types    []TypeCalibration `json:"types"`
	Policies []funnel.Policy   `json:"policies"`
	// Holdout names the holdout set, when there is one.
	Holdout string `json:"holdout,omitempty"`
	// Scorer, when set, names the encoder of the pair scorer whose
	// probabilities the thresholds are (Analysis.UseScorer); empty, they
	// are cosines.
	Scorer string `json:"scorer,omitempty"`
}

// Calibrate sweeps, per action type, the duplicate and ambiguous
// thresholds over an analysed run and picks the duplicate threshold that
// maximizes recall while the type's precision (over all its labelled
// events, those the key and exact stages decide included) stays at or
// above the target; among equal recalls the highest threshold. The
// ambiguous threshold is set for a judge (see CalibrateConfig). With no
// judge the band goes to the policy's fallback: when that is confirm, the
// band flags too and the ambiguous threshold is held to the precision
// target as well.
func Calibrate(a *Analysis, cfg CalibrateConfig) (*Calibration, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	set := a.Run.Set
	if !set.Labelled() {
		return nil, fmt.Errorf("bench calibrate: set %s is not labelled", set.Name)
	}
	// Group events by type.
	type typ struct {
		base   funnel.Policy
		events []int
	}
	var order []string
	types := map[string]*typ{}
	add := func(name string, base funnel.Policy, i int) {
		t := types[name]
		if t == nil {
			t = &typ{base: base}
			types[name] = t
			order = append(order, name)
		}
		t.events = append(t.events, i)
	}
	poolByTool := map[string]int{}
	for i := range set.Events {
		if a.Pool[i] {
			poolByTool[set.Events[i].Tool]++
		}
	}
	for i := range set.Events {
		if a.Run.Decisions[i].Err != "" {
			continue
		}
		p := *a.Policy[i]
		tool := set.Events[i].Tool
		if cfg.ByTool && poolByTool[tool] >= cfg.MinPool && p.Semantic {
			q := p
			q.Name, q.Tools = tool, []string{tool}
			add("tool:"+tool, q, i)
			continue
		}
		add(p.Name, p, i)
	}
	cal := &Calibration{Set: set.Name, Config: cfg, Scorer: a.Scorer}
	var byTool, byType []funnel.Policy
	for _, name := range order {
		t := types[name]
		tc := calibrateType(a, cfg, t.base, t.events)
		if strings.HasPrefix(name, "tool:") {
			tc.Tool = strings.TrimPrefix(name, "tool:")
		}
		p := t.base
		if a.Scorer != "" {
			// The thresholds are the pair scorer's probabilities: the
			// funnel reads them from these keys when the scorer is on.
			p.DuplicateProbability, p.AmbiguousProbability = tc.DuplicateThreshold, tc.AmbiguousThreshold
		} else {
			p.DuplicateThreshold, p.AmbiguousThreshold = tc.DuplicateThreshold, tc.AmbiguousThreshold
		}
		if tc.SemanticReplay != nil {
			p.SemanticReplay = *tc.SemanticReplay
		}
		cal.Types = append(cal.Types, tc)
		if strings.HasPrefix(name, "tool:") {
			byTool = append(byTool, p)
		} else {
			byType = append(byType, p)
		}
	}
	// Policies in the order the funnel should match them: per-tool ones,
	// then the run's own policies in their order (calibrated where the
	// traffic had events of them).
	cal.Policies = append(cal.Policies, byTool...)
	for _, p := range a.Run.Policies {
		if i := slices.IndexFunc(byType, func(q funnel.Policy) bool { return q.Name == p.Name }); i >= 0 {
			p = byType[i]
		}
		cal.Policies = append(cal.Policies, p)
	}
	return cal, nil
}

func isWrite(p *funnel.Policy) bool { return p.ReadOnly == nil || !*p.ReadOnly }

func calibrateType(a *Analysis, cfg CalibrateConfig, base funnel.Policy, events []int) TypeCalibration {
	set := a.Run.Set
	tc := TypeCalibration{Name: base.Name, Write: isWrite(&base), Target: cfg.ReadTarget}
	if tc.Write {
		tc.Target = cfg.WriteTarget
	}
	var pool []int
	var fixed Counts
	for _, i := range events {
		if a.Pool[i] && base.Semantic {
			pool = append(pool, i)
			if set.Events[i].Truth.Expect == "duplicate" {
				tc.PoolDuplicates++
			}
			continue
		}
		fixed.add(&set.Events[i], a.Run.Decisions[i].Flagged(), false)
	}
	tc.Pool = len(pool)
	score := func(dup, amb float64) (all, sem Counts) {
		all = fixed
		for _, i := range pool {
			f := a.flagAt(i, &base, dup, amb)
			all.add(&set.Events[i], f, false)
			sem.add(&set.Events[i], f, false)
		}
		return all, sem
	}
	meets := func(c Counts, target float64) bool {
		return c.TP+c.FP == 0 || float64(c.TP) >= target*float64(c.TP+c.FP)-1e-9
	}
	lowest := cfg.Lowest
	if a.Prob != nil {
		lowest = cfg.ProbLowest
	}
	grid := func(from float64) []float64 {
		var g []float64
		for k := 0; ; k++ {
			t := math.Round((from-float64(k)*cfg.Step)*1e6) / 1e6
			if t < lowest-1e-9 {
				break
			}
			g = append(g, t)
		}
		return g
	}
	// Duplicate threshold, with the band empty.
	bestDup, bestRecall, found := 1.0, -1.0, false
	for _, t := range grid(1) {
		all, _ := score(t, t)
		if !meets(all, tc.Target) {
			continue
		}
		r := val(all.Metrics().Recall)
		if math.IsNaN(r) {
			r = 0
		}
		if !found || r > bestRecall+1e-12 {
			bestDup, bestRecall, found = t, r, true
		}
	}
	tc.Met = found
	ownDup, ownAmb := a.own(&base)
	if tc.PoolDuplicates == 0 && found {
		// No evidence of semantic duplicates: keep the policy's own
		// threshold unless it let a false positive through.
		if all, _ := score(ownDup, ownDup); meets(all, tc.Target) {
			bestDup = ownDup
		}
	}
	tc.DuplicateThreshold = bestDup
	// Ambiguous threshold.
	amb := bestDup
	for _, t := range grid(bestDup) {
		if t < bestDup-cfg.MaxBand-1e-9 {
			break
		}
		var sem Counts
		for _, i := range pool {
			s, _ := a.score(i)
			sem.add(&set.Events[i], !math.IsNaN(s) && s >= t, false)
		}
		ok := meets(sem, cfg.AmbiguousTarget)
		if base.Fallback == funnel.FallbackConfirm {
			all, _ := score(bestDup, t)
			ok = ok && meets(all, tc.Target)
		}
		if !ok {
			break
		}
		amb = t
	}
	if tc.PoolDuplicates == 0 && found && ownAmb <= bestDup {
		// Nor evidence for a band: the sweep would widen it as far as
		// MaxBand, each step sending more calls to the judge or the
		// fallback for nothing; keep the policy's own, unless (with a
		// confirm fallback) it flags a different call.
		if all, _ := score(bestDup, ownAmb); base.Fallback != funnel.FallbackConfirm || meets(all, tc.Target) {
			amb = ownAmb
		}
	}
	tc.AmbiguousThreshold = amb
	all, sem := score(tc.DuplicateThreshold, tc.AmbiguousThreshold)
	tc.Expected, tc.Semantic = all.Metrics(), sem.Metrics()
	ceil := fixed
	for _, i := range pool {
		e := &set.Events[i]
		s, _ := a.score(i)
		f := a.flagAt(i, &base, tc.DuplicateThreshold, tc.AmbiguousThreshold) ||
			(!math.IsNaN(s) && s >= tc.AmbiguousThreshold && e.Truth.Expect == "duplicate")
		ceil.add(e, f, false)
	}
	tc.JudgeCeiling = ceil.Metrics().Recall
	if !tc.Write {
		tc.SemanticReplay, tc.Replay = semanticReplay(a, cfg, pool, grid(1))
	}
	return tc
}

// semanticReplay chooses a read-only type's replay threshold: among the
// grid's thresholds at which the pool's free-text matches at or above it
// are duplicates at least cfg.ReplayTarget of the time, the one that
// replays the most duplicates (the highest among equals). Nil when no
// threshold replays a duplicate at that precision.
func semanticReplay(a *Analysis, cfg CalibrateConfig, pool []int, grid []float64) (*float64, *Metrics) {
	set := a.Run.Set
	at := func(t float64) Counts {
		var c Counts
		for _, i := range pool {
			s, mismatch := a.score(i)
			c.add(&set.Events[i], !math.IsNaN(s) && !mismatch && s >= t, false)
		}
		return c
	}
	best, bestTP := 0.0, 0
	for _, t := range grid {
		c := at(t)
		if c.TP > bestTP && float64(c.TP) >= cfg.ReplayTarget*float64(c.TP+c.FP)-1e-9 {
			best, bestTP = t, c.TP
		}
	}
	if bestTP == 0 {
		return nil, nil
	}
	m := at(best).Metrics()
	return &best, &m
}

// SetHoldout records the holdout run's score per action type.
func (c *Calibration) SetHoldout(r *Report) {
	c.Holdout = r.Set
	for i := range c.Types {
		if m, ok := r.ByPolicy[c.Types[i].Name]; ok {
			m := m
			c.Types[i].Holdout = &m
		}
	}
}

// SetHoldoutAnalysis scores the holdout offline, for thresholds the
// funnel cannot apply yet (probabilities, after UseScorer on a): a, the
// holdout replayed with the policies calibration started from, is
// flagged per event at its type's calibrated thresholds (events the key
// and exact stages decided keep their decisions).
func (c *Calibration) SetHoldoutAnalysis(a *Analysis) {
	c.Holdout = a.Run.Set.Name
	set := a.Run.Set
	typeOf := func(i int) int { // the first type the event belongs to
		for k, t := range c.Types {
			if t.Tool != "" && t.Tool == set.Events[i].Tool && a.Policy[i].Semantic || t.Tool == "" && t.Name == a.Policy[i].Name {
				return k
			}
		}
		return -1
	}
	for k := range c.Types {
		t := &c.Types[k]
		i := slices.IndexFunc(c.Policies, func(p funnel.Policy) bool { return p.Name == t.Name })
		if i < 0 {
			continue
		}
		base := &c.Policies[i]
		var cnt Counts
		for i := range set.Events {
			d := &a.Run.Decisions[i]
			if d.Err != "" || typeOf(i) != k {
				continue
			}
			f := d.Flagged()
			if a.Pool[i] && base.Semantic {
				f = a.flagAt(i, base, t.DuplicateThreshold, t.AmbiguousThreshold)
			}
			cnt.add(&set.Events[i], f, false)
		}
		m := cnt.Metrics()
		t.Holdout = &m
	}
}

// WriteYAML writes the policies as a config snippet: a policies: list of
// funnel.Policy values, each with the precision and recall it is
// expected to give as a comment.
func (c *Calibration) WriteYAML(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# idem bench calibrate on traffic set %s: precision target %.3g for write actions, %.3g for read-only, %.3g for a read's free-text replay.\n",
		c.Set, c.Config.WriteTarget, c.Config.ReadTarget, c.Config.ReplayTarget)
	if c.Scorer != "" {
		fmt.Fprintf(&b, "# Thresholds are probabilities of the pair scorer (pairscore, fitted to %s), not cosines.\n", c.Scorer)
	}
	b.WriteString("# Expected figures are for the calibration set without a judge (the ambiguous band goes to the fallback).\n")
	b.WriteString("policies:\n")
	for _, p := range c.Policies {
		if i := slices.IndexFunc(c.Types, func(t TypeCalibration) bool { return t.Name == p.Name }); i >= 0 {
			t := c.Types[i]
			met := ""
			if !t.Met {
				met = " — TARGET NOT REACHED at any threshold"
			}
			fmt.Fprintf(&b, "  # %s: expected precision %s%s, recall %s over %d events (%d decided by the thresholds, %d of them duplicates)%s\n",
				p.Name, pct(t.Expected.Precision), evidence(t.Expected.Counts, "flagged"), pct(t.Expected.Recall), t.Expected.Events, t.Pool, t.PoolDuplicates, met)
			if t.Holdout != nil {
				fmt.Fprintf(&b, "  # %s on holdout %s: precision %s, recall %s over %d events\n", p.Name, c.Holdout, pct(t.Holdout.Precision), pct(t.Holdout.Recall), t.Holdout.Events)
			}
			switch {
			case t.SemanticReplay != nil:
				fmt.Fprintf(&b, "  # %s: free-text matches at or above semantic_replay replay: expected precision %s%s, recall %s over %d threshold-decided events\n",
					p.Name, pct(t.Replay.Precision), evidence(t.Replay.Counts, "replays"), pct(t.Replay.Recall), t.Pool)
			case !t.Write:
				fmt.Fprintf(&b, "  # %s: no threshold replays free-text matches at precision %.3g: such reads execute\n", p.Name, c.Config.ReplayTarget)
			}
		} else {
			fmt.Fprintf(&b, "  # %s: no events in the calibration set; unchanged\n", p.Name)
		}
		out, err := yaml.Marshal(p)
		if err != nil {
			return fmt.Errorf("bench: policy %s as YAML: %w", p.Name, err)
		}
		for j, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			if j == 0 {
				b.WriteString("  - " + line + "\n")
			} else {
				b.WriteString("    " + line + "\n")
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// evidence says how far c's precision is supported: the lower end of its
// 95 % Wilson score interval over the calls flagged (what names them).
// One right replay and none wrong is a precision of 1 that supports
// little; a target of 0.99 is supported from about 380 right and none
// wrong.
func evidence(c Counts, what string) string {
	n := c.TP + c.FP
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (95 %% lower bound %.3f over %d %s)", precisionLowerBound(c.TP, n), n, what)
}

// precisionLowerBound is the lower end of the 95 % Wilson score interval
// of tp successes out of n (0 when n is 0).
func precisionLowerBound(tp, n int) float64 {
	if n == 0 {
		return 0
	}
	const z = 1.959964 // the normal quantile of 0.975
	p, fn := float64(tp)/float64(n), float64(n)
	centre := p + z*z/(2*fn)
	spread := z * math.Sqrt(p*(1-p)/fn+z*z/(4*fn*fn))
	return max(0, (centre-spread)/(1+z*z/fn))
}

// ReadPolicies reads a policies: list (the snippet WriteYAML writes, or
// the same key of a config file).
func ReadPolicies(data []byte) ([]funnel.Policy, error) {
	var doc struct {
		Policies []funnel.Policy `yaml:"policies"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("bench: policies: %w", err)
	}
	if len(doc.Policies) == 0 {
		return nil, errors.New("bench: policies: none found (want a top-level policies: list)")
	}
	for _, p := range doc.Policies {
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	return doc.Policies, nil
}

// WriteText writes the calibration as a table.
func (c *Calibration) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "action type\twrite\ttarget\tpool\tpool dups\tduplicate\tambiguous\tprecision\t95% lower\tflagged\trecall\tjudge-ceiling recall\tsemantic replay\t"
	if c.Holdout != "" {
		head += "holdout precision\tholdout recall\tholdout events\t"
	}
	fmt.Fprintln(tw, head)
	for _, t := range c.Types {
		met := ""
		if !t.Met {
			met = " (target not met)"
		}
		replay := "–"
		if t.SemanticReplay != nil {
			replay = fmt.Sprintf("%.3f", *t.SemanticReplay)
		}
		flagged := t.Expected.TP + t.Expected.FP
		lower := "–"
		if flagged > 0 {
			lower = fmt.Sprintf("%.3f", precisionLowerBound(t.Expected.TP, flagged))
		}
		fmt.Fprintf(tw, "%s%s\t%v\t%.3g\t%d\t%d\t%.3f\t%.3f\t%s\t%s\t%d\t%s\t%s\t%s\t", t.Name, met, t.Write, t.Target, t.Pool, t.PoolDuplicates,
			t.DuplicateThreshold, t.AmbiguousThreshold, pct(t.Expected.Precision), lower, flagged, pct(t.Expected.Recall), pct(t.JudgeCeiling), replay)
		if c.Holdout != "" {
			if t.Holdout != nil {
				fmt.Fprintf(tw, "%s\t%s\t%d\t", pct(t.Holdout.Precision), pct(t.Holdout.Recall), t.Holdout.Events)
			} else {
				fmt.Fprint(tw, "–\t–\t0\t")
			}
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
