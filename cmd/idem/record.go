package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/idem-dev/idem/client"
)

func init() {
	register("complete", command{
		summary: "record the result of an executed call (POST /v1/complete)",
		run: func(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
			return runRecordCommand("complete", completeUsage, args, stdin, stdout, stderr)
		},
	})
	register("fail", command{
		summary: "record the failure of an executed call, transient or --permanent (POST /v1/fail)",
		run: func(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
			return runRecordCommand("fail", failUsage, args, stdin, stdout, stderr)
		},
	})
	register("forget", command{
		summary: "forget a wrong record, so that its key executes again (DELETE /v1/records/{key})",
		run: func(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
			return runRecordCommand("forget", forgetUsage, args, stdin, stdout, stderr)
		},
	})
}

const serverFlagsUsage = `  --server URL        the server (default $IDEM_SERVER, else http://127.0.0.1:8080)
  --api-key-env VAR   read the API key from VAR (default IDEM_API_KEY)
`

const completeUsage = `usage: idem complete [flags] KEY TOKEN [RESULT]

Records RESULT (a JSON value) as the result of the execution that holds
TOKEN, the lease token of the execute answer for KEY; without RESULT it is
read from standard input. Later checks of KEY replay it. Prints the record;
exit status 0, 2 for bad input or a refusal (unknown key, stale token, a
record already finished), 1 for other failures.

flags:
` + serverFlagsUsage + `  --json              print the record as JSON
`

const failUsage = `usage: idem fail [flags] KEY TOKEN [ERROR]

Records ERROR (a JSON value; default {"error":"failed"}) as the failure of
the execution that holds TOKEN for KEY. A transient failure (the default)
lets the key run again; --permanent makes later checks replay the error.
Prints the record; exit status as for idem complete.

flags:
` + serverFlagsUsage + `  --permanent         the failure is permanent (replayed), not transient
  --json              print the record as JSON
`

const forgetUsage = `usage: idem forget [flags] KEY

Deletes the record under KEY (a wrong result, a stuck key): the next check
of KEY executes again. A call still running under its lease is refused
(409) unless --force. Exit status 0, 2 for an unknown key, a live lease or
bad input, 1 for other failures.

flags:
` + serverFlagsUsage + `  --force             forget it even while its call runs under a live lease
`

// runRecordCommand runs idem complete, fail or forget against a server.
func runRecordCommand(name, usage string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	serverURL := fs.String("server", "", "")
	keyEnv := fs.String("api-key-env", "IDEM_API_KEY", "")
	asJSON := fs.Bool("json", false, "")
	permanent := fs.Bool("permanent", false, "")
	force := fs.Bool("force", false, "")
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "idem %s: "+format+"\n", append([]any{name}, a...)...)
		return code
	}
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		io.WriteString(stdout, usage)
		return 0
	}
	if err != nil {
		io.WriteString(stderr, usage)
		return fail(2, "%v", err)
	}
	if name != "fail" && *permanent {
		return fail(2, "--permanent is a flag of idem fail only")
	}
	if name != "forget" && *force {
		return fail(2, "--force is a flag of idem forget only")
	}
	if name == "forget" && *asJSON {
		return fail(2, "--json: forget prints no record")
	}
	minArgs, maxArgs := 2, 3
	if name == "forget" {
		minArgs, maxArgs = 1, 1
	}
	if len(pos) < minArgs || len(pos) > maxArgs {
		io.WriteString(stderr, usage)
		return 2
	}
	key := pos[0]
	if key == "" {
		return fail(2, "KEY is empty")
	}
	var value json.RawMessage
	if name != "forget" {
		if pos[1] == "" {
			return fail(2, "TOKEN is empty")
		}
		switch {
		case len(pos) == 3:
			value = json.RawMessage(pos[2])
		case name == "complete":
			data, err := io.ReadAll(io.LimitReader(stdin, 64<<20))
			if err != nil {
				return fail(1, "reading standard input: %v", err)
			}
			value = json.RawMessage(bytes.TrimSpace(data))
		default:
			value = json.RawMessage(`{"error":"failed"}`)
		}
		what := "RESULT"
		if name == "fail" {
			what = "ERROR"
		}
		if !json.Valid(value) {
			return fail(2, "%s is not a JSON value (a string needs its quotes: '\"done\"')", what)
		}
	}
	c, err := apiClient(*serverURL, *keyEnv)
	if err != nil {
		return fail(2, "%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var rec *client.Record
	switch name {
	case "complete":
		rec, err = c.Complete(ctx, key, pos[1], value)
	case "fail":
		rec, err = c.Fail(ctx, key, pos[1], value, !*permanent)
	case "forget":
		if *force {
			err = c.ForceForget(ctx, key)
		} else {
			err = c.Forget(ctx, key)
		}
	}
	if err != nil {
		code := 1
		if ae, ok := errors.AsType[*client.APIError](err); ok && ae.Status < 500 {
			code = 2
		}
		return fail(code, "%v", err)
	}
	switch {
	case rec == nil:
		fmt.Fprintf(stdout, "forgot %s: its next check executes\n", key)
	case *asJSON:
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		enc.Encode(rec)
	default:
		printRecord(stdout, rec)
	}
	return 0
}

// apiClient is the client of the server that --server names (else
// $IDEM_SERVER, else the default address), with the API key from keyEnv.
func apiClient(serverURL, keyEnv string) (*client.Client, error) {
	base := serverURL
	if base == "" {
		base = os.Getenv("IDEM_SERVER")
	}
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	cc := client.DefaultConfig(base)
	cc.APIKey = os.Getenv(keyEnv)
	return client.New(cc)
}

func printRecord(w io.Writer, r *client.Record) {
	fmt.Fprintf(w, "key         %s\nstatus      %s\nnext check  %s\n", r.Key, r.Status, r.NextCheck)
	if len(r.Result) > 0 {
		fmt.Fprintf(w, "result      %s\n", r.Result)
	}
	if len(r.Error) > 0 {
		fmt.Fprintf(w, "error       %s (%s)\n", r.Error, r.ErrorClass)
	}
	if r.Confirmed != "" {
		fmt.Fprintf(w, "confirmed   %s (another action than it)\n", r.Confirmed)
	}
	if r.RetainUntil > 0 {
		fmt.Fprintf(w, "kept until  %s\n", time.UnixMilli(r.RetainUntil).UTC().Format(time.RFC3339))
	}
}
