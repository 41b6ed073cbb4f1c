// Command pairtrain trains the pair scorer (package pairscore) on the
// public data beside the repository and writes its IDF table and weights
// into pairscore/, printing the evaluation report; with -check it writes
// nothing and fails unless the committed files are what it made. Run it
// from the repository root:
//
//	go run ./bench/cmd/pairtrain [-check] [-cache DIR] [-upstream DIR] [-out DIR]
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/idem-dev/idem/bench/pairtrain"
	"github.com/idem-dev/idem/embed"
)

func main() {
	os.Exit(run())
}

func run() int {
	cfg := pairtrain.DefaultConfig()
	flag.StringVar(&cfg.Upstream, "upstream", cfg.Upstream, "the public data folder")
	flag.StringVar(&cfg.CacheDir, "cache", filepath.Join(os.TempDir(), "idem-pairscore-cache"), "keep embeddings here between runs (\"\": none)")
	out := flag.String("out", "pairscore", "where idf.txt and weights.json go")
	check := flag.Bool("check", false, "write nothing; exit 1 unless the files in -out are what this run makes")
	dumpTo := flag.String("dump", "", "write every example with its features to this TSV file")
	flag.Parse()
	if *dumpTo != "" {
		f, err := os.Create(*dumpTo)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pairtrain:", err)
			return 1
		}
		defer f.Close()
		cfg.Dump = f
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	enc, err := embed.NewUSE(embed.DefaultUSEConfig())
	if err != nil {
		fmt.Fprintln(os.Stderr, "pairtrain:", err)
		return 1
	}
	cfg.Progress = func(done, total int) { fmt.Fprintf(os.Stderr, "\rembedded %d/%d texts", done, total) }
	res, err := pairtrain.Run(ctx, cfg, enc, enc.Dim(), os.Stdout)
	fmt.Fprintln(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pairtrain:", err)
		return 1
	}
	status := 0
	for _, f := range []struct {
		name string
		data []byte
	}{{"idf.txt", res.IDF}, {"weights.json", res.Weights}} {
		path := filepath.Join(*out, f.name)
		if *check {
			have, err := os.ReadFile(path)
			switch {
			case err != nil:
				fmt.Fprintln(os.Stderr, "pairtrain:", err)
				status = 1
			case !bytes.Equal(have, f.data):
				fmt.Fprintf(os.Stderr, "pairtrain: %s differs from what training makes\n", path)
				status = 1
			default:
				fmt.Fprintf(os.Stderr, "pairtrain: %s reproduced byte for byte\n", path)
			}
			continue
		}
		if err := os.WriteFile(path, f.data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "pairtrain:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "pairtrain: wrote %s\n", path)
	}
	return status
}
