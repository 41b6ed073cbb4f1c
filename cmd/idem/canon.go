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

const canonUsage = `usage: idem canon [--json] [--tools FILE] [--reference-time T] [CALL]

CALL is {"tool": NAME, "arguments": OBJECT-OR-STRING}; without it the call is
read from standard input. --tools reads tool definitions (OpenAI function
tools or MCP tools, a JSON array) whose schemas decide field classes.
--reference-time (2019-03-01, or an RFC 3339 date-time with offset) reads
relative dates ("tomorrow", "next Monday") against that day.
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
}

func runCanon(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("canon", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { io.WriteString(stderr, canonUsage) }
	asJSON := fs.Bool("json", false, "print JSON")
	toolsFile := fs.String("tools", "", "tool definitions file")
	refTime := fs.String("reference-time", "", "the day relative dates are read against")
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
	if *asJSON {
		out := canonOutput{
			Tool: call.Tool, Canonical: call.Canonical,
			Hash: fmt.Sprintf("%016x", call.Hash), IdentityDigest: fmt.Sprintf("%016x", call.IdentityDigest),
			TextView: call.TextView(), TextTruncated: call.TextTruncated(), Fields: call.Fields,
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
	for _, f := range call.Fields {
		typed := ""
		if f.Typed != "" {
			typed = "(" + f.Typed + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", f.Path, f.Class, f.Rule, f.Value, typed)
	}
	tw.Flush()
	fmt.Fprintln(stdout, "text view:")
	for _, line := range strings.Split(call.TextView(), "\n") {
		fmt.Fprintf(stdout, "  %s\n", line)
	}
	if call.TextTruncated() {
		fmt.Fprintln(stdout, "  (text view truncated)")
	}
	return 0
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
