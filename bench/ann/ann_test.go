package ann

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem/embed"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestTexts(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"stsb/sts-dev.csv": "main-news\tf\t2012\t1\t5.0\tA man is playing a guitar.\tA man   plays the guitar.\n" +
			"main-news\tf\t2012\t2\t1.0\tA man is playing a guitar.\ttoo short\n",
		"sgd/calls.jsonl": `{"system_utterance": "Your table is booked. Enjoy your meal tonight!", "parameters": {"city": "San Jose is lovely"}}` + "\n" +
			`{"user_utterances_since_last_call": ["Book it for two people please", "yes"]}` + "\n",
		"bfcl/q.json": `{"question": [[{"role": "user", "content": "What is the weather in Paris today?"}]], "function": [{"description": "Get the current weather for a city."}]}`,
		"notes.txt":   "this file is neither JSON nor STS-B",
	})
	got, err := Texts(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"A man is playing a guitar.", "A man plays the guitar.", // whitespace collapsed, repeat dropped
		"Your table is booked. Enjoy your meal tonight!", "Your table is booked.", "Enjoy your meal tonight!",
		"Book it for two people please", // "yes" is under three words
		"What is the weather in Paris today?", "Get the current weather for a city.",
	}
	if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("texts %q\nwant (any order) %q", got, want)
	}
	if slices.Contains(got, "San Jose is lovely") {
		t.Fatal("a parameter value (not prose) was taken")
	}
	again, _ := Texts(dir, 1)
	other, _ := Texts(dir, 2)
	if !slices.Equal(got, again) {
		t.Fatal("same files and seed, different order")
	}
	if slices.Equal(got, other) {
		t.Fatal("the seed does not change the order")
	}
	if _, err := Texts(t.TempDir(), 1); err == nil {
		t.Fatal("an empty folder gave texts")
	}
}

func TestReadTexts(t *testing.T) {
	dir := writeFiles(t, map[string]string{"t.txt": "one text\n\n  one   text \nanother text\n"})
	got, err := ReadTexts(filepath.Join(dir, "t.txt"))
	if err != nil || !slices.Equal(got, []string{"one text", "another text"}) {
		t.Fatalf("%q, %v", got, err)
	}
	if _, err := ReadTexts(filepath.Join(dir, "missing.txt")); err == nil {
		t.Fatal("a missing file read")
	}
}

// countingUSE is the built-in encoder, counting the texts it embeds.
type countingUSE struct {
	*embed.USE
	n atomic.Int64
}

func (c *countingUSE) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.n.Add(int64(len(texts)))
	return c.USE.Embed(ctx, texts)
}

func TestVectorsCache(t *testing.T) {
	u, err := embed.SharedUSE()
	if err != nil {
		t.Fatal(err)
	}
	enc := &countingUSE{USE: u}
	path := filepath.Join(t.TempDir(), "v.bin")
	texts := []string{"send the invoice to Ann", "email Ann the invoice", "what is the weather in Paris"}
	ctx := context.Background()
	first, err := Vectors(ctx, enc, texts, path, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if enc.n.Load() != 3 {
		t.Fatalf("embedded %d texts, want 3", enc.n.Load())
	}
	// Reordered and extended: only the new text is embedded; cached
	// vectors are the same bits.
	more := []string{texts[2], "book a table for two", texts[0]}
	second, err := Vectors(ctx, enc, more, path, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if enc.n.Load() != 4 {
		t.Fatalf("embedded %d texts in all, want 4", enc.n.Load())
	}
	if !slices.Equal(second[0], first[2]) || !slices.Equal(second[2], first[0]) {
		t.Fatal("cached vectors differ from the computed ones")
	}
	// A torn last record (a crash mid-write) is cut off and recomputed.
	st, _ := os.Stat(path)
	if err := os.Truncate(path, st.Size()-100); err != nil {
		t.Fatal(err)
	}
	third, err := Vectors(ctx, enc, more, path, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if enc.n.Load() != 5 || !slices.Equal(third[1], second[1]) {
		t.Fatalf("after a torn record: %d embedded in all (want 5)", enc.n.Load())
	}
	if st2, _ := os.Stat(path); st2.Size() != st.Size() {
		t.Fatalf("cache is %d bytes, want %d (torn record replaced)", st2.Size(), st.Size())
	}
	// A file of another model or dimension is refused.
	bad := filepath.Join(t.TempDir(), "bad.bin")
	os.WriteFile(bad, []byte("IDEMVEC1\x00\x01\x00\x00\x03\x00abc"), 0o644)
	if _, err := Vectors(ctx, enc, texts, bad, 2, nil); !errors.Is(err, ErrCache) {
		t.Fatalf("foreign cache: %v, want ErrCache", err)
	}
}

// FuzzOpenCache: any file content is read or refused, never a panic.
func FuzzOpenCache(f *testing.F) {
	f.Add([]byte("IDEMVEC1\x04\x00\x00\x00\x01\x00m"))
	f.Add([]byte("IDEMVEC1\x04\x00\x00\x00\x01\x00m" + strings.Repeat("\x00", 24+5)))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "c.bin")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		vecs, file, err := openCache(path, "m", 4)
		if err != nil {
			return
		}
		defer file.Close()
		for _, v := range vecs {
			if len(v) != 4 {
				t.Fatalf("vector of %d values", len(v))
			}
		}
	})
}

func TestMeasure(t *testing.T) {
	u, err := embed.SharedUSE()
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{
		"send the invoice to Ann", "email Ann the invoice", "what is the weather in Paris",
		"book a table for two at eight", "reserve a table for 2 people tonight", "cancel my order 123",
		"refund order 123 please", "transfer 50 dollars to Bob", "pay Bob fifty dollars", "weather forecast for Paris",
		"play some jazz music", "turn off the kitchen lights",
	}
	vecs, err := u.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	base, queries := vecs[:10], vecs[10:]
	cfg := DefaultConfig()
	cfg.K, cfg.EfSearch = 3, []int{10}
	truth := Truth(base, queries, cfg.K)
	r, err := Measure(cfg, base, queries, truth, Builds(cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, x := range r.Results {
		names[x.Index] = true
		// Ten vectors: every index searches all of them, so recall is 1.
		if x.RecallK != 1 || x.Recall1 != 1 || x.QPS <= 0 {
			t.Fatalf("%+v: want recall 1 on ten vectors", x)
		}
		if x.Index == "idem-hnsw" && (x.BytesPer < 512*4 || x.BytesPer > 2600) {
			t.Fatalf("idem-hnsw %.0f bytes per 512-d vector", x.BytesPer)
		}
	}
	if !names["idem-hnsw"] || !names["idem-index"] || !names["exact"] || !names["coder-hnsw"] {
		t.Fatalf("measured %v", names)
	}
	var sb strings.Builder
	if err := r.WriteText(&sb); err != nil || !strings.Contains(sb.String(), "idem-hnsw") {
		t.Fatalf("table: %v\n%s", err, sb.String())
	}
	dir := t.TempDir()
	if err := Export(dir, cfg, base, queries, truth); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "base.f32")); err != nil || st.Size() != 10*512*4 {
		t.Fatalf("base.f32: %v, %v", st, err)
	}
	if st, err := os.Stat(filepath.Join(dir, "truth.i32")); err != nil || st.Size() != 2*3*4 {
		t.Fatalf("truth.i32: %v, %v", st, err)
	}
}

// TestCoderOnlyABaseline: github.com/coder/hnsw is measured here and
// nowhere reached from what decides (DESIGN.md says why).
func TestCoderOnlyABaseline(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/idem-dev/idem/funnel",
		"github.com/idem-dev/idem/server", "github.com/idem-dev/idem/index/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if strings.Contains(string(out), "github.com/coder/hnsw") {
		t.Fatal("github.com/coder/hnsw is a dependency of funnel, server or index")
	}
}
