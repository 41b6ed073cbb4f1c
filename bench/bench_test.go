package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/client"
	"github.com/idem-dev/idem/embed"
	"github.com/idem-dev/idem/server"
)

// encoder is the built-in encoder, loaded once per test binary.
func encoder(t testing.TB) *embed.USE {
	t.Helper()
	u, err := embed.SharedUSE()
	if err != nil {
		t.Fatalf("loading the built-in encoder: %v", err)
	}
	return u
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
	r := runSet(t, "testdata/handchecked", testConfig())
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

// TestServerReplay replays the hand-checked set through the HTTP API (the
// real server and client over the in-process funnel) and gets the same
// confusion matrix as in-process.
func TestServerReplay(t *testing.T) {
	set, err := ReadDir("testdata/handchecked")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	l, err := NewLocal(cfg, encoder(t), set)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	scfg := server.DefaultConfig()
	scfg.Addr = "127.0.0.1:0"
	srv, err := server.New(scfg, server.Deps{Funnel: l.f, Ledger: l.ledger})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	sc, err := NewServerChecker(client.DefaultConfig(hs.URL), "")
	if err != nil {
		t.Fatal(err)
	}
	// The server's funnel runs on the local engine's virtual clock; the
	// replay moves it.
	run, err := ReplayWith(context.Background(), cfg, clockedChecker{sc, l}, set)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Analyze(context.Background(), encoder(t), run)
	if err != nil {
		t.Fatal(err)
	}
	r := Score(a)
	local := runSet(t, "testdata/handchecked", testConfig())
	for i, er := range r.Results {
		if lr := local.Results[i]; er.Decision.Decision != lr.Decision.Decision || er.Stage != lr.Stage {
			t.Errorf("line %d over HTTP: %s/%s, in-process %s/%s", er.Line, er.Decision.Decision, er.Stage, lr.Decision.Decision, lr.Stage)
		} else if er.Decision.Key != lr.Decision.Key || er.Decision.MatchKey != lr.Decision.MatchKey {
			// Sent under the run id's prefix, reported without it.
			t.Errorf("line %d over HTTP: key %q match %q, in-process %q %q", er.Line, er.Decision.Key, er.Decision.MatchKey, lr.Decision.Key, lr.Decision.MatchKey)
		}
	}
	if m := r.Overall; m.TP != 8 || m.FP != 1 || m.FN != 1 || m.TN != 12 || m.Errors != 0 {
		t.Errorf("over HTTP: TP %d FP %d FN %d TN %d errors %d, want 8 1 1 12 0", m.TP, m.FP, m.FN, m.TN, m.Errors)
	}
	if r.Latency["round_trip"].N != 22 {
		t.Errorf("round trips timed: %d, want 22", r.Latency["round_trip"].N)
	}
}

// clockedChecker is a ServerChecker whose SetNow moves a local engine's
// clock.
type clockedChecker struct {
	*ServerChecker
	l *Local
}

func (c clockedChecker) SetNow(ms int64) { c.l.SetNow(ms) }

// TestCalibrateHoldout calibrates on one small set and replays another
// with the chosen policies, end to end.
func TestCalibrateHoldout(t *testing.T) {
	r := runSet(t, "testdata/stsb-dev-small", testConfig())
	cal, err := Calibrate(r.Analysis, DefaultCalibrateConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(cal.Types) != 1 || cal.Types[0].Name != "default" || !cal.Types[0].Write {
		t.Fatalf("types: %+v", cal.Types)
	}
	tc := cal.Types[0]
	if tc.Pool != 48 || tc.PoolDuplicates != 12 {
		t.Errorf("pool %d with %d duplicates, want 48 and 12 (every event of the set has text and reaches the semantic stage)", tc.Pool, tc.PoolDuplicates)
	}
	if tc.Met && tc.Expected.Precision != nil && *tc.Expected.Precision < 0.99 {
		t.Errorf("chosen setting has precision %v below the target", *tc.Expected.Precision)
	}
	if tc.AmbiguousThreshold > tc.DuplicateThreshold {
		t.Errorf("ambiguous %v above duplicate %v", tc.AmbiguousThreshold, tc.DuplicateThreshold)
	}
	// The sweep's estimate at the chosen thresholds is what a replay
	// with them gives on the same set (no judge, fallback execute).
	cfg := testConfig()
	cfg.Policies = cal.Policies
	again := runSet(t, "testdata/stsb-dev-small", cfg)
	if got := again.ByPolicy["default"]; got.TP != tc.Expected.TP || got.FP != tc.Expected.FP || got.FN != tc.Expected.FN {
		t.Errorf("replayed with the chosen thresholds: TP %d FP %d FN %d; calibration expected TP %d FP %d FN %d",
			got.TP, got.FP, got.FN, tc.Expected.TP, tc.Expected.FP, tc.Expected.FN)
	}
	hold := runSet(t, "testdata/stsb-train-small", cfg)
	cal.SetHoldout(hold)
	if cal.Types[0].Holdout == nil || cal.Types[0].Holdout.Events != 48 {
		t.Fatalf("holdout not scored: %+v", cal.Types[0].Holdout)
	}
	var y bytes.Buffer
	if err := cal.WriteYAML(&y); err != nil {
		t.Fatal(err)
	}
	pols, err := ReadPolicies(y.Bytes())
	if err != nil {
		t.Fatalf("the snippet does not read back: %v\n%s", err, y.String())
	}
	if len(pols) != len(cal.Policies) || pols[len(pols)-1].DuplicateThreshold != tc.DuplicateThreshold {
		t.Errorf("snippet policies %+v, want %+v", pols, cal.Policies)
	}
	for _, key := range []string{"duplicate_threshold:", "ambiguous_threshold:", "identity_gate:", "on_duplicate:", "expected precision", "on holdout"} {
		if !strings.Contains(y.String(), key) {
			t.Errorf("snippet lacks %q:\n%s", key, y.String())
		}
	}
}

// TestRealTime replays at the speed of t_ms: a transient retry that
// arrives while the first call runs is in progress, one after its result
// is a replayed duplicate.
func TestRealTime(t *testing.T) {
	dir := t.TempDir()
	lines := `{"t_ms": 0, "session": "s", "workflow": "w", "step": "1", "tool": "pay", "arguments": {"to": "acct-1", "amount": 5}, "outcome": {"status": "success", "result": {"id": 1}, "after_ms": 150}, "truth": {"expect": "execute"}}
{"t_ms": 50, "session": "s", "workflow": "w", "step": "1", "tool": "pay", "arguments": {"to": "acct-1", "amount": 5}, "attempt": {"kind": "transient", "number": 2}, "truth": {"expect": "duplicate", "of": 1}}
{"t_ms": 300, "session": "s", "workflow": "w", "step": "1", "tool": "pay", "arguments": {"to": "acct-1", "amount": 5}, "attempt": {"kind": "transient", "number": 3}, "truth": {"expect": "duplicate", "of": 1}}
`
	if err := os.WriteFile(filepath.Join(dir, "traffic.jsonl"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.RealTime = true
	start := time.Now()
	r := runSet(t, dir, cfg)
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Errorf("a real-time replay of 300 ms took %v", el)
	}
	got := []string{r.Results[0].Decision.Decision, r.Results[1].Decision.Decision, r.Results[2].Decision.Decision}
	if got[0] != "execute" || got[1] != "in_progress" || got[2] != "duplicate" {
		t.Errorf("decisions %v, want execute, in_progress, duplicate", got)
	}
	if r.Mode != "in-process, real time" {
		t.Errorf("mode %q", r.Mode)
	}
}

// testConfig is DefaultConfig with a budget no machine runs out of: what
// these tests assert of the decisions must not depend on the machine's
// speed.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Budget = 10 * time.Minute
	return cfg
}

// TestReadHitRates: the report counts, per read-only tool, its reads and
// those answered from an earlier read.
func TestReadHitRates(t *testing.T) {
	r := runSet(t, "../testdata/traffic/tau-airline", testConfig())
	if len(r.Reads) == 0 {
		t.Fatal("no read counted in a set of reads and writes")
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for tool, h := range r.Reads {
		if h.Reads == 0 || h.Replayed > h.Reads || !strings.Contains(text.String(), fmt.Sprintf("  %s: %d of %d", tool, h.Replayed, h.Reads)) {
			t.Errorf("%s: %+v, or not in the text report", tool, h)
		}
	}
}
