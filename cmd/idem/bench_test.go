package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runBenchCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"bench"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestBenchRunWritesReports(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := runBenchCmd(t, "run", "../../bench/testdata/handchecked", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"funnel overall", "baseline (cos ≥ 0.90)", "stage key", "latency (µs)", "report.html"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Overall struct{ TP, FP, FN, TN int } `json:"overall"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if r.Overall.TP != 8 || r.Overall.FP != 1 || r.Overall.FN != 1 || r.Overall.TN != 12 {
		t.Errorf("report.json overall %+v, want 8 1 1 12", r.Overall)
	}
	if st, err := os.Stat(filepath.Join(out, "report.html")); err != nil || st.Size() < 1000 {
		t.Errorf("report.html: %v", err)
	}
}

func TestBenchCalibrateHoldout(t *testing.T) {
	snippet := filepath.Join(t.TempDir(), "policies.yaml")
	code, stdout, stderr := runBenchCmd(t, "calibrate", "../../bench/testdata/stsb-dev-small",
		"--holdout", "../../bench/testdata/stsb-train-small", "--out", snippet)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "holdout precision") || !strings.Contains(stdout, "default") {
		t.Errorf("table lacks the holdout:\n%s", stdout)
	}
	y, err := os.ReadFile(snippet)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(y), "# idem bench calibrate") || !strings.Contains(string(y), "policies:\n") {
		t.Errorf("snippet:\n%s", y)
	}
	// The snippet is accepted back by run.
	code, _, stderr = runBenchCmd(t, "run", "--policies", snippet, "--out", t.TempDir(), "../../bench/testdata/handchecked")
	if code != 0 {
		t.Errorf("run with the calibrated policies: exit %d: %s", code, stderr)
	}
}

// TestBenchCalibrateScorer: with --scorer the snippet's thresholds are
// the pair scorer's probabilities, and the holdout is scored offline.
func TestBenchCalibrateScorer(t *testing.T) {
	snippet := filepath.Join(t.TempDir(), "policies.yaml")
	code, stdout, stderr := runBenchCmd(t, "calibrate", "--scorer", "--budget", "1h", "../../bench/testdata/stsb-dev-small",
		"--holdout", "../../bench/testdata/stsb-train-small", "--out", snippet)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "holdout precision") || !strings.Contains(stdout, "semantic replay") {
		t.Errorf("table:\n%s", stdout)
	}
	y, err := os.ReadFile(snippet)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(y), "probabilities of the pair scorer") || !strings.Contains(string(y), "on holdout stsb-train-small") {
		t.Errorf("snippet:\n%s", y)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "traffic.jsonl"), []byte(`{"t_ms": 0, "session": "s", "tool": "t", "arguments": {}}`+"\n"+`{"t_ms": 1, "session": "s"}`+"\n"), 0o644)
	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{"no subcommand", []string{"walk"}, "unknown subcommand"},
		{"run without set", []string{"run"}, "one traffic set"},
		{"bad flag", []string{"run", "--nope", "x"}, "flag provided but not defined"},
		{"invalid traffic", []string{"run", dir, "--out", t.TempDir()}, "traffic.jsonl:2: tool: missing"},
		{"unknown format", []string{"import", "csv", "a", "b"}, "unknown format"},
		{"bad target", []string{"calibrate", "--target-write", "2", dir}, "write_target"},
		{"bad replay target", []string{"calibrate", "--target-replay", "0", dir}, "replay_target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runBenchCmd(t, tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.msg) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tt.msg)
			}
		})
	}
	if code, stdout, _ := runBenchCmd(t, "--help"); code != 0 || !strings.Contains(stdout, "openai-chat") {
		t.Errorf("help: exit %d\n%s", code, stdout)
	}
}

// TestBenchRunConfig: --config brings an idem config file's settings into
// the replay: an alias for the refund's currency turns the hand-checked
// set's one miss ("US dollars" vs "USD") into a caught duplicate.
func TestBenchRunConfig(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "idem.yaml")
	if err := os.WriteFile(conf, []byte("tools:\n  rules:\n    refund:\n      fields:\n        currency: {aliases: {US dollars: USD}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	code, _, stderr := runBenchCmd(t, "run", "--config", conf, "--no-progress", "--out", out, "../../bench/testdata/handchecked")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Overall struct{ TP, FP, FN, TN int } `json:"overall"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if r.Overall.TP != 9 || r.Overall.FN != 0 {
		t.Errorf("with the alias: overall %+v, want 9 true positives and no miss", r.Overall)
	}
	if code, _, stderr := runBenchCmd(t, "run", "--config", conf+".missing", "../../bench/testdata/handchecked"); code != 2 || !strings.Contains(stderr, "missing") {
		t.Errorf("a missing config: exit %d, %q", code, stderr)
	}
}

// TestBenchRunServerTwice replays one set twice against one server: each
// run's sessions, workflows and keys carry its own run id, so the second
// run scores as the first instead of finding the first run's calls.
func TestBenchRunServerTwice(t *testing.T) {
	url := startServe(t, nil)
	type report struct {
		Mode    string                       `json:"mode"`
		Overall struct{ TP, FP, FN, TN int } `json:"overall"`
	}
	runOnce := func() report {
		out := t.TempDir()
		code, _, stderr := runBenchCmd(t, "run", "../../bench/testdata/handchecked", "--server", url, "--out", out, "--no-progress")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		data, err := os.ReadFile(filepath.Join(out, "report.json"))
		if err != nil {
			t.Fatal(err)
		}
		var r report
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	first, second := runOnce(), runOnce()
	if first.Overall != second.Overall {
		t.Errorf("the second run scored %+v, the first %+v: the runs collided", second.Overall, first.Overall)
	}
	if first.Overall.TP+first.Overall.FN != 9 || first.Overall.FP+first.Overall.TN != 13 {
		t.Errorf("first run %+v: want 9 expected duplicates and 13 expected executions", first.Overall)
	}
	if !strings.Contains(first.Mode, "run id bench-") || first.Mode == second.Mode {
		t.Errorf("modes %q and %q: want each run's own id", first.Mode, second.Mode)
	}
	// An explicit run id is used as given, and checked.
	out := t.TempDir()
	if code, _, stderr := runBenchCmd(t, "run", "../../bench/testdata/handchecked", "--server", url, "--out", out, "--run-id", "a/b"); code != 2 || !strings.Contains(stderr, "run id") {
		t.Errorf("--run-id a/b: exit %d %s", code, stderr)
	}
}
