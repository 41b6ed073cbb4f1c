package embed

import (
	"context"
	"fmt"
	"runtime"
	"testing"
)

// textWithTokens returns the reference text whose token count is closest to n.
func textWithTokens(b *testing.B, cases []referenceCase, n int) (string, int) {
	best, bestN := "", -1
	for _, c := range cases {
		if bestN < 0 || abs(len(c.Tokens)-n) < abs(bestN-n) {
			best, bestN = c.Text, len(c.Tokens)
		}
	}
	return best, bestN
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// BenchmarkUSE measures one text of about 8, 16, 32 and 128 tokens; run it
// with -cpu 1 for the single-core figure. GFLOP/s counts the reference
// graph's multiply-adds for the text (graphMACs) over the wall time.
func BenchmarkUSE(b *testing.B) {
	cases := loadReference(b)
	u := testEncoder(b)
	ctx := context.Background()
	for _, n := range []int{8, 16, 32, 128} {
		text, got := textWithTokens(b, cases, n)
		b.Run(fmt.Sprintf("tokens=%d", got), func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				if _, err := u.Embed(ctx, []string{text}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1e3/float64(b.N), "cpu-ms/op")
			b.ReportMetric(2*float64(graphMACs(b, min(got, USEMaxTokens)))*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "GFLOP/s")
		})
	}
}

// BenchmarkUSETexts200 embeds the 200 texts of bench/tfjs/texts.json (8-51
// tokens, 23.5 on average), the texts bench/tfjs/run.mjs gives TF.js, on one
// worker with each kernel this CPU runs: one text per Embed ("single"), or
// 8 per Embed ("batch8", one model call for the 8). One op is all 200 texts.
func BenchmarkUSETexts200(b *testing.B) {
	texts := loadTexts200(b)
	var macs int64
	all := make([]string, len(texts))
	for i, bt := range texts {
		all[i] = bt.Text
		macs += graphMACs(b, len(bt.IDs))
	}
	ctx := context.Background()
	for _, kern := range KernelNames() {
		if kern == goKernel.name {
			continue // some 20x slower; TestUSEParityKernels runs it
		}
		cfg := DefaultUSEConfig()
		cfg.Workers, cfg.Kernel = 1, kern
		u, err := NewUSE(cfg)
		if err != nil {
			b.Fatal(err)
		}
		for _, per := range []int{1, 8} {
			name := fmt.Sprintf("kernel=%s/single", kern)
			if per > 1 {
				name = fmt.Sprintf("kernel=%s/batch%d", kern, per)
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				cpu := cpuTime()
				for b.Loop() {
					for i := 0; i < len(all); i += per {
						if _, err := u.Embed(ctx, all[i:min(i+per, len(all))]); err != nil {
							b.Fatal(err)
						}
					}
				}
				ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				b.ReportMetric(ns/1e6/float64(len(all)), "ms/text")
				b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1e3/float64(b.N*len(all)), "cpu-ms/text")
				b.ReportMetric(2*float64(macs)/ns, "GFLOP/s")
			})
		}
	}
}

// BenchmarkTokenize tokenizes the 200 texts of bench/tfjs/texts.json; one
// op is all 200.
func BenchmarkTokenize(b *testing.B) {
	texts := loadTexts200(b)
	u, err := NewUSE(DefaultUSEConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, bt := range texts {
			if _, err := u.Tokenize(bt.Text); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkUSEBatch64 measures a batch of 64 reference texts on all cores.
func BenchmarkUSEBatch64(b *testing.B) {
	cases := loadReference(b)
	u := testEncoder(b)
	texts := make([]string, 64)
	tokens := 0
	for i := range texts {
		texts[i] = cases[i*len(cases)/64].Text
		tokens += min(len(cases[i*len(cases)/64].Tokens), USEMaxTokens)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := u.Embed(context.Background(), texts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/64/1e6, "ms/text")
	b.ReportMetric(float64(tokens)/64, "tokens/text")
}

// BenchmarkUSELoad measures loading the embedded model (parse, widen the
// float16 weights, build the tokenizer) and reports the heap the loaded model
// keeps (MB-heap). Garbage collection for the measurement is not timed.
func BenchmarkUSELoad(b *testing.B) {
	b.ReportAllocs()
	var keep *USE
	var heap uint64
	for b.Loop() {
		b.StopTimer()
		keep = nil
		runtime.GC()
		runtime.GC() // twice: sync.Pool keeps a victim cache for one cycle
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		u, err := NewUSE(DefaultUSEConfig())
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = after.HeapAlloc - before.HeapAlloc
		keep = u
		b.StartTimer()
	}
	runtime.KeepAlive(keep)
	b.ReportMetric(float64(heap)/(1<<20), "MB-heap")
}
