package embed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idem-dev/idem/internal/publicdata"
)

type referenceCase struct {
	Text      string    `json:"text"`
	Tokens    []int     `json:"tokens"`
	Embedding []float32 `json:"embedding"`
}

// loadReference reads all 410 reference cases from the public data
// (use-lite/reference.json), skipping the test where it is absent;
// loadReferenceSample reads the committed first 50.
func loadReference(t testing.TB) []referenceCase {
	t.Helper()
	ref := readReference(t, publicdata.Path(t, "use-lite", "reference.json"))
	if len(ref.Cases) != 410 {
		t.Fatalf("reference has %d cases, want 410", len(ref.Cases))
	}
	return ref.Cases
}

func testEncoder(t testing.TB) *USE {
	t.Helper()
	u, err := SharedUSE()
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestUSEParity checks every reference case: identical token ids and an
// embedding within cosine 0.99999 of the reference implementation's.
// Texts are identified by index only in failures.
func TestUSEParity(t *testing.T) { checkParity(t, loadReference(t)) }

func checkParity(t *testing.T, cases []referenceCase) {
	u := testEncoder(t)
	texts := make([]string, len(cases))
	for i, c := range cases {
		texts[i] = c.Text
		tk, err := u.Tokenize(c.Text)
		if err != nil {
			t.Errorf("case %d: tokenize: %v", i, err)
			continue
		}
		if !slices.Equal(tk.IDs, c.Tokens) {
			t.Errorf("case %d: token ids differ: got %d ids %v, want %d ids %v", i, len(tk.IDs), head(tk.IDs), len(c.Tokens), head(c.Tokens))
		}
		if tk.Clipped != (len(c.Tokens) > USEMaxTokens) {
			t.Errorf("case %d: Clipped = %v with %d tokens", i, tk.Clipped, len(c.Tokens))
		}
	}
	vecs, err := u.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	worst, worstAt := 2.0, -1
	for i, c := range cases {
		if len(vecs[i]) != USEDim {
			t.Fatalf("case %d: dim %d", i, len(vecs[i]))
		}
		cos := Cosine(vecs[i], c.Embedding)
		if cos < worst {
			worst, worstAt = cos, i
		}
		if cos < 0.99999 {
			t.Errorf("case %d (%d tokens): cosine to reference %.7f < 0.99999", i, len(c.Tokens), cos)
		}
	}
	t.Logf("worst cosine to reference over %d cases: %.7f (case %d)", len(cases), worst, worstAt)
}

func head(ids []int) []int {
	if len(ids) > 12 {
		return ids[:12]
	}
	return ids
}

func TestUSEEmptyText(t *testing.T) {
	u := testEncoder(t)
	for _, text := range []string{"", " ", "\t\n ", "\u00a0\u3000"} {
		if _, err := u.Embed(context.Background(), []string{"fine", text}); !errors.Is(err, ErrEmptyText) {
			t.Errorf("Embed(%q) error = %v, want ErrEmptyText", text, err)
		}
		if _, err := u.Tokenize(text); !errors.Is(err, ErrEmptyText) {
			t.Errorf("Tokenize(%q) error = %v, want ErrEmptyText", text, err)
		}
	}
	if ErrEmptyText.Error() != "embed: empty text" {
		t.Errorf("ErrEmptyText = %q", ErrEmptyText)
	}
}

// FuzzTokenize checks that any string, including invalid UTF-8, tokenizes
// without panicking into valid ids, and that whatever tokenizes also embeds
// into a unit vector.
func FuzzTokenize(f *testing.F) {
	for _, s := range []string{"hello world", "", " ", "café", "\xff\xfe", "東京タワー", "a\u0000b", "😀😀 :) ://", strings.Repeat("x ", 300), "\u2581\u2581"} {
		f.Add(s)
	}
	u := testEncoder(f)
	f.Fuzz(func(t *testing.T, s string) {
		tk, err := u.Tokenize(s)
		if err != nil {
			if !errors.Is(err, ErrEmptyText) {
				t.Fatalf("Tokenize error %v", err)
			}
			return
		}
		if len(tk.IDs) == 0 {
			t.Fatal("no tokens for a non-blank text")
		}
		for _, id := range tk.IDs {
			if id < 0 || id >= u.enc.nEmb {
				t.Fatalf("token id %d out of range", id)
			}
		}
		if len(s) > 200 {
			return // embedding long inputs is slow under the fuzzer; ids are checked
		}
		v, err := u.Embed(context.Background(), []string{s})
		if err != nil {
			t.Fatal(err)
		}
		if n := Cosine(v[0], v[0]); math.Abs(n-1) > 1e-5 {
			t.Fatalf("self-cosine %v", n)
		}
	})
}

func TestUSEClippingAndWindows(t *testing.T) {
	u := testEncoder(t)
	ctx := context.Background()
	// 140 words: the differing last word lies past the model's 128 tokens.
	base := strings.Repeat("word ", 139)
	a, b := base+"alpha", base+"omega"
	ta, err := u.Tokenize(a)
	if err != nil {
		t.Fatal(err)
	}
	if !ta.Clipped || ta.Count() <= USEMaxTokens {
		t.Fatalf("Tokenize: %d tokens, Clipped %v; want > %d and clipped", ta.Count(), ta.Clipped, USEMaxTokens)
	}
	if n, err := u.TokenCount(a); err != nil || n != ta.Count() {
		t.Fatalf("TokenCount = %d, %v; want %d", n, err, ta.Count())
	}
	v, err := u.Embed(ctx, []string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if c := Cosine(v[0], v[1]); c < 0.999999 {
		t.Fatalf("texts differing only after token 128 have cosine %v; the model should not see the difference", c)
	}
	wa, err := u.EmbedWindows(ctx, a, 64)
	if err != nil {
		t.Fatal(err)
	}
	wb, err := u.EmbedWindows(ctx, b, 64)
	if err != nil {
		t.Fatal(err)
	}
	if len(wa) < 2 || len(wa) != len(wb) {
		t.Fatalf("EmbedWindows gave %d and %d windows", len(wa), len(wb))
	}
	if c := Cosine(wa[len(wa)-1], wb[len(wb)-1]); c > 0.9999 {
		t.Fatalf("last windows have cosine %v; the tail difference should be visible", c)
	}
	// A short text has one window, equal to its embedding.
	short := "send the invoice to bob"
	ws, err := u.EmbedWindows(ctx, short, 64)
	if err != nil {
		t.Fatal(err)
	}
	e, err := u.Embed(ctx, []string{short})
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 || Cosine(ws[0], e[0]) < 0.9999999 {
		t.Fatalf("short text: %d windows, want 1 equal to Embed", len(ws))
	}
	if _, err := u.EmbedWindows(ctx, short, 0); !errors.Is(err, ErrConfig) {
		t.Fatalf("stride 0: error %v, want ErrConfig", err)
	}
}

func TestWindows(t *testing.T) {
	ids := make([]int, 300)
	for i := range ids {
		ids[i] = i
	}
	w := Windows(ids, 128, 100)
	// Windows start at 0, 100 and end at the last id: [0,128) [100,228) [172,300).
	starts := []int{}
	for _, x := range w {
		if len(x) != 128 {
			t.Fatalf("window of %d ids", len(x))
		}
		starts = append(starts, x[0])
	}
	if !slices.Equal(starts, []int{0, 100, 172}) {
		t.Fatalf("window starts %v", starts)
	}
	if got := Windows(ids[:5], 128, 64); len(got) != 1 || len(got[0]) != 5 {
		t.Fatalf("short input: %v", got)
	}
}

// TestUSEConcurrent embeds from many goroutines at once (run with -race) and
// checks that results do not depend on batching or concurrency, to the bit.
func TestUSEConcurrent(t *testing.T) {
	cases := loadReferenceSample(t)[:24]
	u := testEncoder(t)
	ctx := context.Background()
	texts := make([]string, len(cases))
	for i, c := range cases {
		texts[i] = c.Text
	}
	batch, err := u.Embed(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(texts))
	for i := range texts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := u.Embed(ctx, texts[i:i+1])
			if err != nil {
				errs <- err
				return
			}
			if !slices.Equal(v[0], batch[i]) {
				errs <- fmt.Errorf("text %d: embedded alone, its vector differs from the batch's (cosine %v)", i, Cosine(v[0], batch[i]))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestUSECanceled(t *testing.T) {
	u := testEncoder(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := u.Embed(ctx, []string{"one", "two", "three"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

func TestUSEConfig(t *testing.T) {
	cfg := DefaultUSEConfig()
	cfg.Workers = -1
	if _, err := NewUSE(cfg); !errors.Is(err, ErrConfig) {
		t.Fatalf("NewUSE with Workers -1: %v, want ErrConfig", err)
	}
	u := testEncoder(t)
	if u.Dim() != 512 || u.Name() == "" || u.MaxTokens() != 128 {
		t.Fatalf("Dim %d Name %q MaxTokens %d", u.Dim(), u.Name(), u.MaxTokens())
	}
	var _ Embedder = u
}

// TestUSEMemory reports the heap the loaded model keeps.
func TestUSEMemory(t *testing.T) {
	runtime.GC()
	runtime.GC() // twice: sync.Pool keeps a victim cache for one cycle
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	u, err := NewUSE(DefaultUSEConfig())
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(u)
	mb := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
	t.Logf("heap kept by the loaded model: %.1f MB (embedded float16 file: %.1f MB, read-only, of which the token table stays float16)", mb, float64(len(useLiteFile))/(1<<20))
	if mb > 40 {
		t.Errorf("loaded model keeps %.1f MB of heap, budget 40 MB", mb)
	}
}
