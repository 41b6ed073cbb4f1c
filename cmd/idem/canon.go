package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/idem-dev/idem/canon"
)

func init() {
	register("canon", command{
		summary: "print a tool call's canonical form, hash, identity digest and field classes",
		run:     runCanon,
	})
}

const canonUsage = `usage: idem canon [--json] [--tools FILE] [--reference-time T] [--against CALL-OR-FILE] [CALL]

CALL is {"tool": NAME, "arguments": OBJECT-OR-STRING}; without it the call is
read from standard input. --tools reads tool definitions (OpenAI function
tools or MCP tools, a JSON array) whose schemas decide field classes.
--reference-time (2019-03-01, or an RFC 3339 date-time with offset) reads
relative dates ("tomorrow", "next Monday") and dates without a year against
that day. --against grades every identity value against the same field of
another call (a call as JSON, or a file holding one): equal, restated (a
probable restatement: the reading that took the two for one value is
printed beside it) or different.
`

// canonOutput is the --json form of a canonicalized call.
type canonOutput struct {
	Tool           string          `json:"tool"`
	Canonical      json.RawMessage `json:"canonical"`
	Hash           string          `json:"hash"`
	IdentityDigest string          `json:"identity_digest"`
	TextView       string          `json:"text_view"`
	TextTruncated  bool            `json:"text_truncated"`
	Fields         []canon.Field   `json:"fields"`
	// Against is the grade of the identity leaves against --against.
	Against *againstOutput `json:"against,omitempty"`
}

type againstOutput struct {
	Tool    string            `json:"tool"`
	Overall canon.Grade       `json:"overall"`
	Leaves  []canon.LeafGrade `json:"leaves"`
}

func runCanon(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("canon", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { io.WriteString(stderr, canonUsage) }
	asJSON := fs.Bool("json", false, "print JSON")
	toolsFile := fs.String("tools", "", "tool definitions file")
	refTime := fs.String("reference-time", "", "the day relative dates are read against")
	against := fs.String("against", "", "another call (JSON, or a file holding it) to grade the identity values against")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "idem canon: "+format+"\n", a...)
		return 2
	}
	var today canon.Date
	if *refTime != "" {
		var err error
		if today, err = canon.ParseReference(*refTime); err != nil {
			return fail("--reference-time: %v", err)
		}
	}
	cfg := canon.DefaultConfig()
	if *toolsFile != "" {
		data, err := os.ReadFile(*toolsFile)
		if err != nil {
			return fail("%v", err)
		}
		tools, err := canon.ParseTools(data)
		if err != nil {
			return fail("%s: %v", *toolsFile, err)
		}
		cfg.Tools = make(map[string]canon.ToolConfig, len(tools))
		for _, t := range tools {
			cfg.Tools[t.Name] = canon.ToolConfig{Schema: t.Schema}
		}
	}
	var input []byte
	switch fs.NArg() {
	case 0:
		// Room for the largest arguments plus the envelope around them.
		data, err := io.ReadAll(io.LimitReader(stdin, int64(2*cfg.MaxBytes+4096)))
		if err != nil {
			return fail("reading standard input: %v", err)
		}
		input = data
	case 1:
		input = []byte(fs.Arg(0))
	default:
		fs.Usage()
		return 2
	}
	tool, arguments, err := decodeCallEnvelope(input)
	if err != nil {
		return fail("%v", err)
	}
	c, err := canon.New(cfg)
	if err != nil {
		return fail("%v", err)
	}
	call, err := c.CanonicalizeOn(tool, arguments, today)
	if err != nil {
		return fail("%s", strings.TrimPrefix(err.Error(), "canon: "))
	}
	var cmp *canon.Comparison
	var other *canon.Call
	if *against != "" {
		if other, err = readAgainst(c, *against, today); err != nil {
			return fail("--against: %v", err)
		}
		g := canon.Compare(call, other, today)
		cmp = &g
	}
	if *asJSON {
		out := canonOutput{
			Tool: call.Tool, Canonical: call.Canonical,
			Hash: canon.HashHex(call.Hash), IdentityDigest: canon.HashHex(call.IdentityDigest),
			TextView: call.TextView(), TextTruncated: call.TextTruncated(), Fields: call.Fields,
		}
		if cmp != nil {
			out.Against = &againstOutput{Tool: other.Tool, Overall: cmp.Overall, Leaves: cmp.Leaves}
		}
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false) // one line, so "canonical" stays byte-exact
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "idem canon: %v\n", err)
			return 1
		}
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "tool\t%s\n", call.Tool)
	fmt.Fprintf(tw, "canonical\t%s\n", call.Canonical)
	fmt.Fprintf(tw, "hash\t%016x\n", call.Hash)
	fmt.Fprintf(tw, "identity digest\t%016x\n", call.IdentityDigest)
	tw.Flush()
	fmt.Fprintln(stdout, "fields:")
	tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	grades := map[string]canon.LeafGrade{}
	if cmp != nil {
		for _, l := range cmp.Leaves {
			grades[l.Path] = l
		}
	}
	for _, f := range call.Fields {
		typed := ""
		if f.Typed != "" {
			typed = "(" + f.Typed + ")"
		}
		if cmp != nil {
			// Every row has the grade's cells, so the columns stay aligned.
			grade, reading := "", ""
			if l, ok := grades[f.Path]; ok {
				delete(grades, f.Path)
				grade, reading = l.Grade.String(), l.Reading
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Path, f.Class, f.Rule, f.Value, typed, grade, reading)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", f.Path, f.Class, f.Rule, f.Value, typed)
	}
	if cmp != nil {
		for _, l := range cmp.Leaves {
			if _, only := grades[l.Path]; only {
				fmt.Fprintf(tw, "  %s\t\t\t(only in --against)\t\t%s\t\n", l.Path, l.Grade)
			}
		}
	}
	tw.Flush()
	if cmp != nil {
		restated, different := 0, 0
		for _, l := range cmp.Leaves {
			switch l.Grade {
			case canon.Restated:
				restated++
			case canon.Different:
				different++
			}
		}
		what := ""
		if other.Tool != call.Tool {
			what = fmt.Sprintf(" (another tool: %s)", other.Tool)
		}
		fmt.Fprintf(stdout, "against: %s%s: %d identity values restated, %d different\n", cmp.Overall, what, restated, different)
	}
	fmt.Fprintln(stdout, "text view:")
	for _, line := range strings.Split(call.TextView(), "\n") {
		fmt.Fprintf(stdout, "  %s\n", line)
	}
	if call.TextTruncated() {
		fmt.Fprintln(stdout, "  (text view truncated)")
	}
	return 0
}

// readAgainst reads the call --against names: JSON given inline (it
// starts with "{"), or a file holding it.
func readAgainst(c *canon.Canonicalizer, v string, today canon.Date) (*canon.Call, error) {
	data := []byte(v)
	if !strings.HasPrefix(strings.TrimSpace(v), "{") {
		var err error
		if data, err = os.ReadFile(v); err != nil {
			return nil, err
		}
	}
	tool, arguments, err := decodeCallEnvelope(data)
	if err != nil {
		return nil, err
	}
	call, err := c.CanonicalizeOn(tool, arguments, today)
	if err != nil {
		return nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "canon: "))
	}
	return call, nil
}

// decodeCallEnvelope reads {"tool": …, "arguments": …}, rejecting unknown
// keys and naming the missing or mistyped field.
func decodeCallEnvelope(input []byte) (string, []byte, error) {
	var env struct {
		Tool      *string         `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	}
	d := json.NewDecoder(bytes.NewReader(input))
	d.DisallowUnknownFields()
	if err := d.Decode(&env); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return "", nil, fmt.Errorf("input: %s: want %s, got %s", te.Field, te.Type, te.Value)
		}
		return "", nil, fmt.Errorf("input: %v", strings.TrimPrefix(err.Error(), "json: "))
	}
	if d.More() {
		return "", nil, errors.New("input: more than one JSON value")
	}
	if env.Tool == nil {
		return "", nil, errors.New("input: tool: missing")
	}
	if env.Arguments == nil {
		return "", nil, errors.New("input: arguments: missing")
	}
	return *env.Tool, env.Arguments, nil
}
