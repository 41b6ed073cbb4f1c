package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/idem-dev/idem/bench/ann"
	"github.com/idem-dev/idem/embed"
)

const benchANNUsage = `
  idem bench ann [flags]
      Embed N+Q real texts once (cached in --cache), index N of them and
      search with the other Q: recall@1 and @10 against the exact scan,
      queries/s on one goroutine, build time and bytes per vector, for
      idem's HNSW, the exact scan and github.com/coder/hnsw (a baseline),
      in one run.
        --texts FILE            one text per line (deduplicated)
        --upstream DIR          or take the prose of the public data sets in DIR
        --cache FILE            the vector cache (default <user cache dir>/idem/ann-vectors.bin)
        --n N                   indexed vectors (default 100000)
        --queries Q             held-out query vectors (default 1000)
        --m M                   HNSW links per node above layer 0 (default 16)
        --ef-construction E     candidate list while building (default 100)
        --ef-search LIST        comma-separated efSearch values (default 50,100,200)
        --seed S                level PRNG seed (default 1)
        --coder=false           skip github.com/coder/hnsw (slow: 13 CPU-s to build 10,000)
        --export DIR            write base.f32, queries.f32, truth.i32, meta.json for bench/ann_reference.py
        --embed-only            fill the cache and stop
        --json                  print the report as JSON
`

func benchANN(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench ann", flag.ContinueOnError)
	textsFile := fs.String("texts", "", "")
	upstream := fs.String("upstream", "", "")
	cache := fs.String("cache", "", "")
	n := fs.Int("n", 100000, "")
	q := fs.Int("queries", 1000, "")
	cfg := ann.DefaultConfig()
	fs.IntVar(&cfg.M, "m", cfg.M, "")
	fs.IntVar(&cfg.EfConstruction, "ef-construction", cfg.EfConstruction, "")
	efs := fs.String("ef-search", "50,100,200", "")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "")
	fs.BoolVar(&cfg.Coder, "coder", true, "")
	export := fs.String("export", "", "")
	embedOnly := fs.Bool("embed-only", false, "")
	asJSON := fs.Bool("json", false, "")
	noBar := fs.Bool("no-progress", false, "")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return benchUsageError{"bench ann takes no positional arguments"}
	case (*textsFile == "") == (*upstream == ""):
		return benchUsageError{"bench ann needs exactly one of --texts and --upstream"}
	case *n < 1 || *q < 1:
		return benchUsageError{"--n and --queries must be >= 1"}
	}
	if cfg.EfSearch, err = parseInts(*efs); err != nil {
		return benchUsageError{"--ef-search: " + err.Error()}
	}
	if err := cfg.Validate(); err != nil {
		return benchUsageError{err.Error()}
	}
	if *cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return benchUsageError{"no user cache dir: pass --cache"}
		}
		*cache = filepath.Join(dir, "idem", "ann-vectors.bin")
	}
	if err := os.MkdirAll(filepath.Dir(*cache), 0o755); err != nil {
		return err
	}
	var texts []string
	if *textsFile != "" {
		texts, err = ann.ReadTexts(*textsFile)
	} else {
		texts, err = ann.Texts(*upstream, 1)
	}
	if err != nil {
		return benchUsageError{err.Error()}
	}
	if len(texts) < *n+*q {
		return benchUsageError{fmt.Sprintf("%d distinct texts, need --n + --queries = %d", len(texts), *n+*q)}
	}
	texts = texts[:*n+*q]
	enc, err := embed.NewUSE(embed.DefaultUSEConfig())
	if err != nil {
		return err
	}
	var progress func(done, total int)
	if !*noBar && isTerminal(stderr) {
		bar := progressbar.NewOptions(len(texts), progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetDescription("embedding"), progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(time.Second))
		progress = func(done, _ int) { bar.Set(done) }
		defer bar.Finish()
	} else {
		progress = func(done, total int) { fmt.Fprintf(stderr, "embedded %d/%d\n", done, total) }
	}
	vecs, err := ann.Vectors(ctx, enc, texts, *cache, 256, progress)
	if err != nil {
		return err
	}
	if *embedOnly {
		fmt.Fprintf(stdout, "%d vectors in %s\n", len(vecs), *cache)
		return nil
	}
	return benchANNMeasure(ctx, cfg, vecs[:*n], vecs[*n:], *export, *asJSON, stdout, stderr)
}

// parseInts parses a comma-separated list of integers.
func parseInts(s string) ([]int, error) {
	var out []int
	for p := range strings.SplitSeq(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func benchANNMeasure(ctx context.Context, cfg ann.Config, base, queries [][]float32, export string, asJSON bool, stdout, stderr io.Writer) error {
	fmt.Fprintf(stderr, "exact top-%d of %d queries over %d vectors\n", cfg.K, len(queries), len(base))
	truth := ann.Truth(base, queries, cfg.K)
	if export != "" {
		if err := ann.Export(export, cfg, base, queries, truth); err != nil {
			return err
		}
	}
	r, err := ann.Measure(cfg, base, queries, truth, ann.Builds(cfg), func(s string) { fmt.Fprintln(stderr, s) })
	if err != nil {
		return err
	}
	if export != "" {
		if err := writeFile(filepath.Join(export, "report.json"), r.WriteJSON); err != nil {
			return err
		}
	}
	if asJSON {
		return r.WriteJSON(stdout)
	}
	if err := r.WriteText(stdout); err != nil {
		return err
	}
	if export != "" {
		fmt.Fprintf(stdout, "\nwrote %s; the reference on the same vectors: python3 bench/ann_reference.py %s\n", export, export)
	}
	return nil
}
