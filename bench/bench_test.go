package bench

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/idem-dev/idem/embed"
)

// The built-in encoder is loaded once per test binary.
var (
	useOnce sync.Once
	useEnc  *embed.USE
	useErr  error
)

func encoder(t testing.TB) *embed.USE {
	t.Helper()
	useOnce.Do(func() { useEnc, useErr = embed.NewUSE(embed.DefaultUSEConfig()) })
	if useErr != nil {
		t.Fatalf("loading the built-in encoder: %v", useErr)
	}
	return useEnc
}

// runSet replays, analyses and scores the set in dir with cfg.
func runSet(t testing.TB, dir string, cfg Config) *Report {
	t.Helper()
	set, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	run, err := Replay(context.Background(), cfg, encoder(t), set)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Analyze(context.Background(), encoder(t), run)
	if err != nil {
		t.Fatal(err)
	}
	return Score(a)
}

// TestHandChecked scores the hand-made set whose every decision is known
// (testdata/handchecked/README.md) and checks the confusion matrix.
func TestHandChecked(t *testing.T) {
	r := runSet(t, "testdata/handchecked", DefaultConfig())
	// Per line: the decision and stage the funnel must take, and the
	// resulting outcome.
	want := []struct{ decision, stage, outcome string }{
		1:  {"execute", "new", "tn"},
		2:  {"in_progress", "key", "tp"},
		3:  {"duplicate", "key", "tp"},
		4:  {"duplicate", "exact", "tp"},
		5:  {"execute", "new", "tn"},
		6:  {"execute", "new", "tn"},
		7:  {"execute", "new", "tn"},
		8:  {"duplicate", "exact", "tp"},
		9:  {"execute", "new", "tn"},
		10: {"execute", "new", "fn"},
		11: {"execute", "new", "tn"},
		12: {"duplicate", "exact", "tp"},
		13: {"execute", "new", "tn"},
		14: {"execute", "new", "tn"},
		15: {"execute", "new", "tn"},
		16: {"execute", "new", "tn"},
		17: {"in_progress", "key", "tp"},
		18: {"execute", "new", "tn"},
		19: {"duplicate", "exact", "fp"},
		20: {"execute", "new", "tn"},
		21: {"duplicate", "exact", "tp"},
		22: {"uncertain", "key", "tp"},
	}
	if len(r.Results) != len(want)-1 {
		t.Fatalf("%d results, want %d", len(r.Results), len(want)-1)
	}
	for _, got := range r.Results {
		w := want[got.Line]
		if got.Err != "" || got.Decision.Decision != w.decision || got.Stage != w.stage || got.Outcome != w.outcome {
			t.Errorf("line %d: %s/%s scored %s (err %q), want %s/%s scored %s",
				got.Line, got.Decision.Decision, got.Stage, got.Outcome, got.Err, w.decision, w.stage, w.outcome)
		}
	}
	checkCounts := func(name string, got Metrics, tp, fp, fn, tn, hn, hnfp int) {
		t.Helper()
		if got.TP != tp || got.FP != fp || got.FN != fn || got.TN != tn || got.HardNeg != hn || got.HardNegFP != hnfp {
			t.Errorf("%s: TP %d FP %d FN %d TN %d hard-neg %d/%d, want TP %d FP %d FN %d TN %d hard-neg %d/%d",
				name, got.TP, got.FP, got.FN, got.TN, got.HardNegFP, got.HardNeg, tp, fp, fn, tn, hnfp, hn)
		}
	}
	checkCounts("overall", r.Overall, 8, 1, 1, 12, 5, 1)
	checkCounts("stage key", r.ByStage["key"], 4, 0, 0, 0, 0, 0)
	checkCounts("stage exact", r.ByStage["exact"], 4, 1, 0, 0, 1, 1)
	checkCounts("stage new", r.ByStage["new"], 0, 0, 1, 12, 4, 0)
	checkCounts("tool refund", r.ByTool["refund"], 1, 0, 1, 3, 1, 0)
	checkCounts("tag hard-negative", r.ByTag["hard-negative"], 0, 1, 0, 4, 5, 1)
	if p, rc := *r.Overall.Precision, *r.Overall.Recall; p != 8.0/9 || rc != 8.0/9 {
		t.Errorf("precision %v recall %v, want 8/9 and 8/9", p, rc)
	}
	if f := *r.Overall.HardNegFPRate; f != 0.2 {
		t.Errorf("hard-negative FP rate %v, want 0.2", f)
	}
	if r.Latency["total"].N != 22 {
		t.Errorf("total latency has %d samples, want 22", r.Latency["total"].N)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "funnel overall") || !strings.Contains(text.String(), "baseline") {
		t.Errorf("table lacks rows:\n%s", text.String())
	}
}
