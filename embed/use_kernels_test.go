package embed

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestUSEParityKernels runs the reference cases on every kernel this CPU
// has, batched (the texts stacked into model calls) and one text per call,
// and requires the same bits everywhere: the kernel a machine picks, and the
// texts a text is batched with, never change its vector. Each run also keeps
// cosine >= 0.99999 to the reference. The portable Go kernel, some 200 times
// slower than the assembly, runs every 41st case (10 cases of 5 to 39
// tokens); TestKernelsBitIdentical checks it tile by tile.
func TestUSEParityKernels(t *testing.T) {
	cases := loadReference(t)
	ctx := context.Background()
	var first [][]float32 // the first kernel's vectors, by case
	firstName := ""
	for _, name := range KernelNames() {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultUSEConfig()
			cfg.Kernel, cfg.Workers = name, 1
			cfg.MaxBatchTokens = 4 * USEMaxTokens // several model calls
			u, err := NewUSE(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if u.Kernel() != name {
				t.Fatalf("Kernel() = %q, want %q", u.Kernel(), name)
			}
			step := 1
			if name == goKernel.name {
				step = 41
			}
			var idx []int
			var texts []string
			for i := 0; i < len(cases); i += step {
				idx, texts = append(idx, i), append(texts, cases[i].Text)
			}
			batch, err := u.Embed(ctx, texts)
			if err != nil {
				t.Fatal(err)
			}
			worst := 2.0
			for j, i := range idx {
				single, err := u.Embed(ctx, []string{cases[i].Text})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(single[0], batch[j]) {
					t.Errorf("case %d: alone and batched, vectors differ (cosine %v)", i, Cosine(single[0], batch[j]))
				}
				if first != nil && first[i] != nil && !slices.Equal(batch[j], first[i]) {
					t.Errorf("case %d: kernels %s and %s give different vectors (cosine %v)", i, name, firstName, Cosine(batch[j], first[i]))
				}
				cos := Cosine(batch[j], cases[i].Embedding)
				worst = min(worst, cos)
				if cos < 0.99999 {
					t.Errorf("case %d: cosine to reference %.7f < 0.99999", i, cos)
				}
			}
			if first == nil {
				first, firstName = make([][]float32, len(cases)), name
				for j, i := range idx {
					first[i] = batch[j]
				}
			}
			t.Logf("kernel %s: %d cases, batched = alone = %s to the bit; worst cosine to reference %.7f", name, len(idx), firstName, worst)
		})
	}
}

// cancelAfter is a context whose Err turns to context.Canceled after its
// first n calls: it cancels a forward pass at a chosen layer boundary,
// with no clock.
type cancelAfter struct {
	context.Context
	n atomic.Int64
}

func (c *cancelAfter) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

func (c *cancelAfter) Done() <-chan struct{} { return nil }

func (c *cancelAfter) Deadline() (time.Time, bool) { return time.Time{}, false }

// TestUSECanceledMidForward cancels during a model call, between layers,
// and expects context.Canceled and no vectors, on one worker and on two.
func TestUSECanceledMidForward(t *testing.T) {
	for _, workers := range []int{1, 2} {
		cfg := DefaultUSEConfig()
		cfg.Workers = workers
		u, err := NewUSE(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// A forward checks ctx 5 times: before it starts, after layer 0's
		// residual projection, attention and feed-forward, and after layer
		// 1's attention.
		for n := int64(0); n < 5; n++ {
			ctx := &cancelAfter{Context: context.Background()}
			ctx.n.Store(n)
			v, err := u.Embed(ctx, []string{"send the invoice to bob", "wire 500 dollars to alice"})
			if !errors.Is(err, context.Canceled) || v != nil {
				t.Errorf("workers %d, canceled after %d checks: %d vectors, error %v; want context.Canceled", workers, n, len(v), err)
			}
		}
	}
}

func TestUSEKernelConfig(t *testing.T) {
	cfg := DefaultUSEConfig()
	if cfg.Kernel != KernelAuto {
		t.Fatalf("default Kernel %q, want %q", cfg.Kernel, KernelAuto)
	}
	cfg.Kernel = "mmx"
	if err := cfg.Validate(); !errors.Is(err, ErrConfig) {
		t.Fatalf("Kernel mmx: %v, want ErrConfig", err)
	}
	cfg = DefaultUSEConfig()
	cfg.MaxBatchTokens = USEMaxTokens - 1
	if err := cfg.Validate(); !errors.Is(err, ErrConfig) {
		t.Fatalf("MaxBatchTokens %d: %v, want ErrConfig", cfg.MaxBatchTokens, err)
	}
	u := testEncoder(t)
	if !slices.Contains(KernelNames(), u.Kernel()) {
		t.Fatalf("auto picked %q, not among %v", u.Kernel(), KernelNames())
	}
}

func TestBatches(t *testing.T) {
	seq := func(n int) []int { return make([]int, n) }
	seqs := [][]int{seq(100), seq(28), seq(1), seq(128), seq(50), seq(60)}
	got := batches(seqs, 128)
	want := []span{{0, 2}, {2, 3}, {3, 4}, {4, 6}}
	if !slices.Equal(got, want) {
		t.Fatalf("batches = %v, want %v", got, want)
	}
	if got := batches(seqs, 1<<20); !slices.Equal(got, []span{{0, 6}}) {
		t.Fatalf("one call: %v", got)
	}
}
