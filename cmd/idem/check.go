package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/client"
	"github.com/idem-dev/idem/config"
	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/ledger"
)

func init() {
	register("check", command{
		summary: "check one tool call against a server (or in-process with --local DIR); exit 0 execute, 3 flagged",
		run:     runCheck,
	})
}

const checkUsage = `usage: idem check [flags] [REQUEST]

REQUEST is the JSON body of POST /v1/check, e.g.
  {"session_id":"s1","workflow_id":"wf","step_id":"1","tool":"send_email","arguments":{"to":"ann@example.com"}}
Without it the request is read from standard input. Prints the decision;
exit status 0 for execute, 3 for any flagged decision (duplicate,
in_progress, confirm, uncertain), 2 for bad input, 1 for other failures.

flags:
  --server URL        the server (default $IDEM_SERVER, else http://127.0.0.1:8080)
  --api-key-env VAR   read the API key from VAR (default IDEM_API_KEY)
  --local DIR         run the check in this process on the ledger in DIR (no server;
                      DIR must not be in use by a running server). An execute claims
                      the key there.
  --config FILE       with --local: the config file (policies, embedder, tools)
  --tenant T          with --local: the tenant (default "default")
  --json              print the whole answer as JSON
`

const exitFlagged = 3

func runCheck(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { io.WriteString(stderr, checkUsage) }
	serverURL := fs.String("server", "", "server URL")
	keyEnv := fs.String("api-key-env", "IDEM_API_KEY", "environment variable holding the API key")
	local := fs.String("local", "", "ledger directory for an in-process check")
	file := fs.String("config", "", "config file (with --local)")
	tenant := fs.String("tenant", config.DefaultTenant, "tenant (with --local)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "idem check: "+format+"\n", a...)
		return code
	}
	var input []byte
	switch fs.NArg() {
	case 0:
		data, err := io.ReadAll(io.LimitReader(stdin, 16<<20))
		if err != nil {
			return fail(1, "reading standard input: %v", err)
		}
		input = data
	case 1:
		input = []byte(fs.Arg(0))
	default:
		fs.Usage()
		return 2
	}
	var req client.CheckRequest
	d := json.NewDecoder(bytes.NewReader(input))
	d.DisallowUnknownFields()
	d.UseNumber()
	if err := d.Decode(&req); err != nil {
		return fail(2, "request: %v", strings.TrimPrefix(err.Error(), "json: "))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var res *client.Result
	if *local != "" {
		r, code, err := checkLocal(ctx, *local, *file, *tenant, &req, stderr)
		if err != nil {
			return fail(code, "%s", strings.ReplaceAll(err.Error(), "\n", "; "))
		}
		res = r
	} else {
		c, err := apiClient(*serverURL, *keyEnv)
		if err != nil {
			return fail(2, "%v", err)
		}
		res, err = c.Check(ctx, req)
		if err != nil {
			code := 1
			if ae, ok := errors.AsType[*client.APIError](err); ok && ae.Status < 500 {
				code = 2
			}
			return fail(code, "%v", err)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		enc.Encode(res)
	} else {
		printResult(stdout, res)
	}
	if res.Flagged() {
		return exitFlagged
	}
	return 0
}

func printResult(w io.Writer, r *client.Result) {
	fmt.Fprintf(w, "decision  %s\nstage     %s\nkey       %s\npolicy    %s\nreason    %s\n", r.Decision, r.Stage, r.Key, r.Policy, r.Reason)
	if r.Token != "" {
		fmt.Fprintf(w, "token     %s\nlease     until %s\n", r.Token, r.LeaseUntil.Format(time.RFC3339))
	}
	if m := r.Match; m != nil {
		fmt.Fprintf(w, "match     %s (%s, similarity %.3f)\n", m.Key, m.Status, m.Similarity)
		if len(m.Result) > 0 {
			fmt.Fprintf(w, "result    %s\n", m.Result)
		}
		if len(m.Error) > 0 {
			fmt.Fprintf(w, "error     %s\n", m.Error)
		}
	}
	if r.ReferenceDate != "" {
		fmt.Fprintf(w, "today     %s (relative dates read against it)\n", r.ReferenceDate)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note      %s\n", n)
	}
	fmt.Fprintf(w, "total     %d µs\n", r.TimingsUS["total"])
}

// checkLocal runs the check in this process on the ledger in dir.
func checkLocal(ctx context.Context, dir, file, tenant string, req *client.CheckRequest, stderr io.Writer) (*client.Result, int, error) {
	cfg, defs, err := loadConfig(file)
	if err != nil {
		return nil, 2, err
	}
	cfg.DataDir = dir
	cfg.Sessions.Warm = 0 // one check: its own session is loaded when it is needed
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := buildApp(cfg, defs, log)
	if err != nil {
		return nil, 1, err
	}
	defer func() {
		// The call's embedding, computed after its claim, is written to its
		// record before the process ends, so the next check compares with it.
		a.funnel.Settle(ctx)
		a.Close(context.Background())
	}()
	fr := funnel.Request{
		Tenant: tenant, Session: req.SessionID, Workflow: req.WorkflowID, Step: req.StepID,
		Key: req.IdempotencyKey, Tool: req.Tool, Arguments: req.Arguments,
		Wait: time.Duration(req.WaitMS) * time.Millisecond, Takeover: req.Takeover,
		Confirmed: req.Confirmed,
	}
	if at := req.Attempt; at != nil {
		fr.Attempt = funnel.Attempt{Kind: funnel.AttemptKind(at.Kind), Number: at.Number, Error: at.Error}
	}
	if req.ReferenceTime != "" {
		if fr.Today, err = canon.ParseReference(req.ReferenceTime); err != nil {
			return nil, 2, fmt.Errorf("reference_time: %w", err)
		}
	}
	res, err := a.funnel.Check(ctx, fr)
	if err != nil {
		_, isCanon := errors.AsType[*canon.Error](err)
		if isCanon || errors.Is(err, funnel.ErrInvalidRequest) || errors.Is(err, funnel.ErrKeyReuse) ||
			errors.Is(err, ledger.ErrInvalidInput) || errors.Is(err, ledger.ErrTooLarge) {
			return nil, 2, err
		}
		return nil, 1, err
	}
	// Through JSON as the server writes it, so both paths print the same
	// thing.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res.Wire()); err != nil {
		return nil, 1, err
	}
	var out client.Result
	if err := json.Unmarshal(b.Bytes(), &out); err != nil {
		return nil, 1, err
	}
	return &out, 0, nil
}
