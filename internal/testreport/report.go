package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// event is one line of go test -json (cmd/test2json's TestEvent).
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
}

// A skip is one skipped test and the reason it printed.
type skip struct {
	pkg, test, reason string
}

// report turns events into go test's plain output plus a skip summary. Not
// safe for concurrent use.
type report struct {
	w     io.Writer
	out   map[string][]string // output of each running test, by package + test
	skips []skip
}

func newReport(w io.Writer) *report {
	return &report{w: w, out: map[string][]string{}}
}

// line handles one line of input.
func (r *report) line(b []byte) {
	var e event
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &e) != nil || e.Action == "" {
		fmt.Fprintf(r.w, "%s\n", b)
		return
	}
	id := e.Package + "\x00" + e.Test
	switch {
	case e.Action == "build-output":
		io.WriteString(r.w, e.Output)
	case e.Test == "":
		// The package's own lines: "ok  pkg 1.2s", "FAIL pkg", "? pkg [no
		// test files]", panics outside tests. Drop the bare PASS.
		if e.Action == "output" && e.Output != "PASS\n" {
			io.WriteString(r.w, e.Output)
		}
	case e.Action == "output":
		r.out[id] = append(r.out[id], e.Output)
	case e.Action == "fail":
		for _, l := range r.out[id] {
			io.WriteString(r.w, l)
		}
		delete(r.out, id)
	case e.Action == "skip":
		r.skips = append(r.skips, skip{pkg: e.Package, test: e.Test, reason: reason(r.out[id])})
		delete(r.out, id)
	case e.Action == "pass":
		delete(r.out, id)
	}
}

// reason is what a skipped test printed, without go test's own lines and
// the file:line prefix t.Skip adds.
func reason(lines []string) string {
	var parts []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		if file, msg, ok := strings.Cut(t, ": "); ok && strings.Contains(file, ".go:") && !strings.Contains(file, " ") {
			t = msg
		}
		parts = append(parts, t)
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " ")
}

// summary prints the skipped tests grouped by reason and returns how many
// skipped for a reason containing one of forbid.
func (r *report) summary(forbid []string) int {
	if len(r.skips) == 0 {
		fmt.Fprintln(r.w, "== no test skipped")
		return 0
	}
	byReason := map[string][]skip{}
	for _, s := range r.skips {
		byReason[s.reason] = append(byReason[s.reason], s)
	}
	reasons := make([]string, 0, len(byReason))
	for k := range byReason {
		reasons = append(reasons, k)
	}
	sort.Strings(reasons)
	fmt.Fprintf(r.w, "== %d tests skipped, by reason:\n", len(r.skips))
	bad := 0
	for _, k := range reasons {
		ss := byReason[k]
		fmt.Fprintf(r.w, "- %s\n", k)
		var pkgs []string
		tests := map[string][]string{}
		for _, s := range ss {
			if tests[s.pkg] == nil {
				pkgs = append(pkgs, s.pkg)
			}
			tests[s.pkg] = append(tests[s.pkg], s.test)
		}
		for _, p := range pkgs {
			fmt.Fprintf(r.w, "    %s: %s\n", shortPkg(p), strings.Join(tests[p], ", "))
		}
		for _, f := range forbid {
			if strings.Contains(k, f) {
				bad += len(ss)
				break
			}
		}
	}
	return bad
}

// shortPkg drops the module path: "github.com/idem-dev/idem/canon" → "canon".
func shortPkg(p string) string {
	const mod = "github.com/idem-dev/idem/"
	return strings.TrimPrefix(p, mod)
}
