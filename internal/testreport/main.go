// Command testreport reads `go test -json` on standard input and prints
// what a plain `go test` prints (each package's result, the output of
// every failing test, build errors), then every skipped test grouped by
// the reason it gave. scripts/test runs the suite through it, so a run
// says which tests did not run and why.
//
// Usage:
//
//	go test -json ./... | testreport [-fail-on-skip TEXT]...
//
// Each -fail-on-skip TEXT makes the exit status 1 when a skip reason
// contains TEXT (scripts/test passes "public data" when the data is
// beside the checkout, and the PostgreSQL skip's wording when it started a
// database): a run that has what a test needs must not skip it. Lines
// that are not JSON (go's own messages) are copied through. The exit
// status is otherwise 0: go test's status is the suite's.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ", ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var forbid multiFlag
	flag.Var(&forbid, "fail-on-skip", "fail when a skip reason contains this text (repeatable)")
	flag.Parse()
	r := newReport(os.Stdout)
	if err := r.read(os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "testreport: %v\n", err)
		os.Exit(1)
	}
	if bad := r.summary(forbid); bad > 0 {
		fmt.Fprintf(os.Stdout, "testreport: %d tests skipped for a reason this run must not have (%s)\n", bad, forbid.String())
		os.Exit(1)
	}
}

// maxLine bounds one line of go test -json (a test may print a lot on one
// line; past this the line is cut).
const maxLine = 4 << 20

func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		r.line(sc.Bytes())
	}
	return sc.Err()
}
