package bench

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/pairscore"
)

// readOnlyCopy copies a traffic set into a temporary folder with its tool
// annotated read-only, so that the read-only policy decides it.
func readOnlyCopy(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	for _, name := range []string{"traffic.jsonl", "tools.json"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "tools.json" {
			if !bytes.Contains(data, []byte(`"readOnlyHint": false`)) {
				t.Fatalf("%s/tools.json: no readOnlyHint to flip", dir)
			}
			data = bytes.ReplaceAll(data, []byte(`"readOnlyHint": false`), []byte(`"readOnlyHint": true`))
		}
		if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func scorer(t *testing.T) *pairscore.Model {
	t.Helper()
	m, err := pairscore.Default()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCalibrateSemanticReplay: with the scorer on, a read-only type's
// free-text matches get a replay threshold (a probability) at which they
// keep the replay precision target, written to the snippet; write types
// get none.
func TestCalibrateSemanticReplay(t *testing.T) {
	m := scorer(t)
	r := runSet(t, readOnlyCopy(t, "testdata/stsb-dev-small"), testConfig())
	r.Analysis.UseScorer(m)
	cfg := DefaultCalibrateConfig()
	cal, err := Calibrate(r.Analysis, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cal.Scorer != m.Encoder() {
		t.Errorf("calibration scorer %q, want %q", cal.Scorer, m.Encoder())
	}
	if len(cal.Types) != 1 || cal.Types[0].Name != "read-only" || cal.Types[0].Write {
		t.Fatalf("types %+v, want the read-only type alone", cal.Types)
	}
	tc := cal.Types[0]
	if tc.SemanticReplay == nil {
		t.Fatalf("no semantic_replay for the read-only type: %+v", tc)
	}
	// Count, from the labels, what replays at the threshold.
	set := r.Analysis.Run.Set
	tp, fp := 0, 0
	for i := range set.Events {
		p := r.Analysis.Prob[i]
		if !r.Analysis.Pool[i] || math.IsNaN(p) || p < *tc.SemanticReplay {
			continue
		}
		if set.Events[i].Truth.Expect == "duplicate" {
			tp++
		} else {
			fp++
		}
	}
	if tp == 0 || float64(tp) < cfg.ReplayTarget*float64(tp+fp) {
		t.Errorf("at semantic_replay %.3f: %d right replays, %d wrong: below the target %.2f", *tc.SemanticReplay, tp, fp, cfg.ReplayTarget)
	}
	if tc.Replay == nil || tc.Replay.TP != tp || tc.Replay.FP != fp {
		t.Errorf("expected replay %+v, counted TP %d FP %d", tc.Replay, tp, fp)
	}
	// A lower threshold by one step either replays no more duplicates or
	// misses the target: the threshold is the one with the most replays.
	lower := *tc.SemanticReplay - cfg.Step
	ltp, lfp := 0, 0
	for i := range set.Events {
		p := r.Analysis.Prob[i]
		if r.Analysis.Pool[i] && !math.IsNaN(p) && p >= lower {
			if set.Events[i].Truth.Expect == "duplicate" {
				ltp++
			} else {
				lfp++
			}
		}
	}
	if ltp > tp && float64(ltp) >= cfg.ReplayTarget*float64(ltp+lfp) {
		t.Errorf("threshold %.3f replays %d duplicates at the target, more than %.3f's %d", lower, ltp, *tc.SemanticReplay, tp)
	}

	var y bytes.Buffer
	if err := cal.WriteYAML(&y); err != nil {
		t.Fatal(err)
	}
	snippet := y.String()
	for _, want := range []string{"semantic_replay: ", "probabilities of the pair scorer", "name: read-only", "95 % lower bound"} {
		if !strings.Contains(snippet, want) {
			t.Errorf("snippet lacks %q:\n%s", want, snippet)
		}
	}
	if strings.Count(snippet, "semantic_replay: ") != 1 {
		t.Errorf("semantic_replay written %d times, want once (the read-only policy):\n%s", strings.Count(snippet, "semantic_replay: "), snippet)
	}
	// The snippet still reads as policies.
	pols, err := ReadPolicies(y.Bytes())
	if err != nil {
		t.Fatalf("the snippet does not read back: %v\n%s", err, snippet)
	}
	if pols[0].Name != "read-only" || pols[0].DuplicateProbability != tc.DuplicateThreshold || pols[0].SemanticReplay != *tc.SemanticReplay {
		t.Errorf("read back %+v, want the read-only policy at probability %v, semantic_replay %v", pols[0], tc.DuplicateThreshold, *tc.SemanticReplay)
	}
	var text bytes.Buffer
	if err := cal.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"semantic replay", "95% lower", "flagged"} {
		if !strings.Contains(text.String(), col) {
			t.Errorf("table lacks the %s column:\n%s", col, text.String())
		}
	}

	// Scored offline on a holdout with the same thresholds.
	h := runSet(t, readOnlyCopy(t, "testdata/stsb-train-small"), testConfig())
	h.Analysis.UseScorer(m)
	cal.SetHoldoutAnalysis(h.Analysis)
	if got := cal.Types[0].Holdout; got == nil || got.Events != 48 {
		t.Fatalf("holdout not scored: %+v", got)
	}
}

// TestCalibrateScorerWrites: for a write type the sweep runs over the
// scorer's probabilities and keeps the write target; no semantic_replay.
func TestCalibrateScorerWrites(t *testing.T) {
	r := runSet(t, "testdata/stsb-dev-small", testConfig())
	r.Analysis.UseScorer(scorer(t))
	cal, err := Calibrate(r.Analysis, DefaultCalibrateConfig())
	if err != nil {
		t.Fatal(err)
	}
	tc := cal.Types[0]
	if !tc.Write || tc.SemanticReplay != nil {
		t.Fatalf("write type %+v: want no semantic_replay", tc)
	}
	if tc.Met && tc.Expected.Precision != nil && *tc.Expected.Precision < 0.99 {
		t.Errorf("precision %v below the write target", *tc.Expected.Precision)
	}
	// The chosen threshold is a probability the scorer gives: flagging at
	// it counts what Expected says.
	set := r.Analysis.Run.Set
	var c Counts
	for i := range set.Events {
		f := r.Analysis.Run.Decisions[i].Flagged()
		if r.Analysis.Pool[i] {
			p := r.Analysis.Prob[i]
			f = !math.IsNaN(p) && p >= tc.DuplicateThreshold && !r.Analysis.probMismatch[i]
		}
		c.add(&set.Events[i], f, false)
	}
	if c.TP != tc.Expected.TP || c.FP != tc.Expected.FP {
		t.Errorf("flagging at p ≥ %.3f: TP %d FP %d; calibration expected TP %d FP %d", tc.DuplicateThreshold, c.TP, c.FP, tc.Expected.TP, tc.Expected.FP)
	}
	var y bytes.Buffer
	if err := cal.WriteYAML(&y); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(y.String(), "semantic_replay") {
		t.Errorf("a write policy got semantic_replay:\n%s", y.String())
	}
}

// TestCalibrateKeepsThresholdsWithoutEvidence: on traffic whose
// threshold-decided events hold no duplicate (tau-retail), calibration
// leaves both thresholds where the policy has them, on the scale in use:
// cosines, or with the scorer its probabilities (the sweep used to widen
// the band to MaxBand below the duplicate threshold, sending more calls
// to the judge for nothing, and kept a cosine as a probability).
func TestCalibrateKeepsThresholdsWithoutEvidence(t *testing.T) {
	r := runSet(t, "../testdata/traffic/tau-retail", testConfig())
	m := scorer(t)
	for _, withScorer := range []bool{false, true} {
		if withScorer {
			r.Analysis.UseScorer(m)
		}
		cal, err := Calibrate(r.Analysis, DefaultCalibrateConfig())
		if err != nil {
			t.Fatal(err)
		}
		var tc *TypeCalibration
		for i := range cal.Types {
			if cal.Types[i].Name == "default" {
				tc = &cal.Types[i]
			}
		}
		if tc == nil || tc.Pool == 0 || tc.PoolDuplicates != 0 {
			t.Fatalf("scorer %v: want the default type with a pool and no duplicates in it: %+v", withScorer, cal.Types)
		}
		pol := funnel.DefaultPolicy()
		dup, amb := pol.DuplicateThreshold, pol.AmbiguousThreshold
		if withScorer {
			dup, amb = m.Thresholds().Duplicate, m.Thresholds().Ambiguous
		}
		if tc.DuplicateThreshold != dup || tc.AmbiguousThreshold != amb {
			t.Errorf("scorer %v: calibrated to %.3f / %.3f, want the policy's own %.3f / %.3f",
				withScorer, tc.DuplicateThreshold, tc.AmbiguousThreshold, dup, amb)
		}
	}
}

// TestPrecisionLowerBound: the Wilson bound at known points: nothing
// supports nothing, ten right of ten supports 0.72, 380 right of 380 a
// precision just under 0.99, 381 just over it.
func TestPrecisionLowerBound(t *testing.T) {
	for _, c := range []struct {
		tp, n  int
		lo, hi float64
	}{{0, 0, 0, 0}, {10, 10, 0.722, 0.723}, {380, 380, 0.9899, 0.989999}, {381, 381, 0.99, 0.9901}, {0, 5, 0, 0}, {50, 100, 0.40, 0.41}} {
		if got := precisionLowerBound(c.tp, c.n); got < c.lo || got > c.hi {
			t.Errorf("precisionLowerBound(%d, %d) = %.5f, want in [%v, %v]", c.tp, c.n, got, c.lo, c.hi)
		}
	}
}
