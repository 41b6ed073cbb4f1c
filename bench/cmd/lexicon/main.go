// Command lexicon writes pairscore/lexicon.txt from a WordNet 3.0
// database (Debian: apt-get install wordnet-base):
//
//	go run ./bench/cmd/lexicon -dict /usr/share/wordnet
//	go run ./bench/cmd/lexicon -check   # exit 1 unless the committed file is what the database makes
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/idem-dev/idem/bench/lexicon"
)

func main() {
	dict := flag.String("dict", "/usr/share/wordnet", "the WordNet 3.0 database (data.*, index.*, *.exc)")
	out := flag.String("out", "pairscore/lexicon.txt", "the file to write")
	check := flag.Bool("check", false, "write nothing; exit 1 unless -out is what this run makes")
	flag.Parse()
	var b bytes.Buffer
	if err := lexicon.Build(*dict, &b); err != nil {
		fmt.Fprintln(os.Stderr, "lexicon:", err)
		os.Exit(1)
	}
	if *check {
		old, err := os.ReadFile(*out)
		if err != nil || !bytes.Equal(old, b.Bytes()) {
			fmt.Fprintf(os.Stderr, "lexicon: %s is not what %s makes\n", *out, *dict)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "lexicon: %s reproduces\n", *out)
		return
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "lexicon:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "lexicon: wrote %s (%d bytes)\n", *out, b.Len())
}
