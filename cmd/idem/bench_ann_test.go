package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchANN runs the whole command on a few real texts: embeds them
// into the cache, measures every index, exports the files the reference
// script reads; a second run takes the vectors from the cache.
func TestBenchANN(t *testing.T) {
	dir := t.TempDir()
	texts := filepath.Join(dir, "texts.txt")
	lines := []string{
		"send the invoice to Ann", "email Ann the invoice", "what is the weather in Paris",
		"book a table for two at eight", "reserve a table for 2 people tonight", "cancel my order 123",
		"refund order 123 please", "transfer 50 dollars to Bob", "pay Bob fifty dollars",
		"play some jazz music", "turn off the kitchen lights",
	}
	os.WriteFile(texts, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	cache, export := filepath.Join(dir, "v.bin"), filepath.Join(dir, "out")
	args := []string{"ann", "--texts", texts, "--cache", cache, "--n", "9", "--queries", "2", "--ef-search", "10,20", "--export", export, "--no-progress"}
	code, stdout, stderr := runBenchCmd(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"idem-hnsw", "coder-hnsw", "exact", "bench/ann_reference.py"} {
		if !strings.Contains(stdout, want) {
			t.Fatalf("no %q in\n%s", want, stdout)
		}
	}
	st, err := os.Stat(cache)
	if err != nil || st.Size() < 11*(8+512*4) {
		t.Fatalf("cache %v, %v: want 11 vectors", st, err)
	}
	var meta struct{ N, Queries, K int }
	data, _ := os.ReadFile(filepath.Join(export, "meta.json"))
	if json.Unmarshal(data, &meta) != nil || meta.N != 9 || meta.Queries != 2 || meta.K != 10 {
		t.Fatalf("meta.json %s", data)
	}
	if code, _, stderr = runBenchCmd(t, append(args, "--json", "--coder=false")...); code != 0 {
		t.Fatalf("second run: exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stderr, "embedded 11/11\n") || strings.Count(stderr, "embedded") != 1 {
		t.Fatalf("second run did not take every vector from the cache: %s", stderr)
	}
	if st2, _ := os.Stat(cache); st2.Size() != st.Size() {
		t.Fatal("second run embedded again")
	}
}

func TestBenchANNUsage(t *testing.T) {
	texts := filepath.Join(t.TempDir(), "t.txt")
	os.WriteFile(texts, []byte("one two three\nfour five six\n"), 0o644)
	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{"no source", []string{"ann"}, "exactly one of --texts and --upstream"},
		{"two sources", []string{"ann", "--texts", texts, "--upstream", "x"}, "exactly one of"},
		{"too few texts", []string{"ann", "--texts", texts, "--n", "5"}, "2 distinct texts, need"},
		{"bad ef", []string{"ann", "--texts", texts, "--ef-search", "10,x"}, "--ef-search"},
		{"ef below k", []string{"ann", "--texts", texts, "--ef-search", "5"}, "EfSearch 5 below K 10"},
		{"bad M", []string{"ann", "--texts", texts, "--m", "1"}, "M must be >= 2"},
		{"missing file", []string{"ann", "--texts", texts + ".no"}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runBenchCmd(t, tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.msg) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tt.msg)
			}
		})
	}
}
