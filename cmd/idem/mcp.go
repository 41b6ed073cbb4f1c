package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/client"
	"github.com/idem-dev/idem/config"
	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/mcpgate"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func init() {
	register("mcp", command{
		summary: "an MCP server in front of another: every tools/call checked with idem first",
		run:     runMCP,
	})
}

const mcpUsage = `usage: idem mcp [flags] -- COMMAND [ARGS...]
       idem mcp [flags] --upstream URL --listen ADDR

Fronts one upstream MCP server. With COMMAND it spawns a stdio upstream and
serves the client on standard input and output (what a desktop client's
config runs); with --upstream it fronts a streamable HTTP server and serves
streamable HTTP on ADDR. Every message passes through unchanged except
tools/call, which idem checks first: execute runs it and records its result,
duplicate answers with the recorded result, confirm / uncertain / in_progress
answer with a tool error saying what happened and how to go on. The
upstream's tool list (schemas and annotations) becomes idem's tool
definitions. Logs go to standard error.

flags:
  --data DIR          the Badger ledger, in this process (default: the config's data_dir)
  --config FILE       config file (policies, embedder, budget, ledger); IDEM_CONFIG
  --server URL        decide on a shared idem server instead of in this process
  --api-key-env VAR   with --server: the variable holding its API key (default IDEM_API_KEY)
  --upstream URL      a streamable HTTP upstream (with --listen)
  --listen ADDR       serve streamable HTTP on ADDR (loopback only)
  --session ID        the idem session of every MCP session (default: one per MCP session)
  --call-timeout D    how long a forwarded tools/call may take (default 2m; its lease is renewed meanwhile)
`

// mcpContext is the context idem mcp runs in; tests replace it.
var mcpContext = serveContext

func runMCP(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { io.WriteString(stderr, mcpUsage) }
	data := fs.String("data", "", "ledger directory")
	file := fs.String("config", os.Getenv("IDEM_CONFIG"), "config file (YAML)")
	serverURL := fs.String("server", "", "idem server URL")
	keyEnv := fs.String("api-key-env", "IDEM_API_KEY", "environment variable holding the API key")
	upstreamURL := fs.String("upstream", "", "streamable HTTP upstream URL")
	listen := fs.String("listen", "", "address to serve streamable HTTP on")
	sessionID := fs.String("session", "", "idem session for every MCP session")
	callTimeout := fs.Duration("call-timeout", 2*time.Minute, "timeout of a forwarded tools/call")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "idem mcp: "+format+"\n", a...)
		return 2
	}
	command := fs.Args()
	switch {
	case len(command) > 0 && *upstreamURL != "":
		return fail("give either -- COMMAND or --upstream, not both")
	case len(command) == 0 && *upstreamURL == "":
		fs.Usage()
		return 2
	case *upstreamURL != "" && *listen == "":
		return fail("--upstream needs --listen ADDR (the stdio client side runs with -- COMMAND)")
	case *listen != "" && *upstreamURL == "":
		return fail("--listen serves an HTTP upstream: give --upstream URL")
	case *serverURL != "" && *data != "":
		return fail("give either --server or --data, not both")
	}
	if *listen != "" {
		host, _, err := net.SplitHostPort(*listen)
		if err != nil || !config.IsLoopback(host) {
			return fail("--listen %q: want a loopback host:port (the gateway has no auth of its own)", *listen)
		}
	}
	cfg, defs, err := loadConfig(*file)
	if err != nil {
		printConfigErrors(stderr, "idem mcp", err)
		return 2
	}
	if *data != "" {
		cfg.DataDir = *data
	}
	log := newLogger(cfg.Log, stderr)
	ctx, stop := mcpContext()
	defer stop()

	var backend mcpgate.Backend
	if *serverURL != "" {
		cc := client.DefaultConfig(*serverURL)
		cc.APIKey = os.Getenv(*keyEnv)
		c, err := client.New(cc)
		if err != nil {
			return fail("%v", err)
		}
		backend = mcpgate.NewRemote(c)
	} else {
		a, err := buildApp(cfg, defs, log)
		if err != nil {
			log.Error("idem mcp", "err", err)
			return 1
		}
		defer closeWithin(log, "closing", a.Close)
		// The config's tools file, if any, and then the upstream's list.
		local, err := mcpgate.NewLocal(a.ledger, config.DefaultTenant, func(up []canon.Tool) (*funnel.Funnel, error) {
			return a.newFunnel(append(append([]canon.Tool(nil), defs...), up...))
		})
		if err != nil {
			log.Error("idem mcp", "err", err)
			return 1
		}
		defer closeWithin(log, "closing the gateway's funnel", local.Close)
		backend = local
	}
	gc := mcpgate.DefaultConfig()
	gc.Session, gc.CallTimeout, gc.Logger = *sessionID, *callTimeout, log
	gw, err := mcpgate.New(gc, backend)
	if err != nil {
		return fail("%v", err)
	}

	if *upstreamURL != "" {
		return serveMCPHTTP(ctx, gw, *upstreamURL, *listen, stdout, log)
	}
	dial := func(ctx context.Context) (mcp.Connection, error) {
		cmd := exec.Command(command[0], command[1:]...)
		cmd.Stderr = stderr // the upstream's logs go where ours do
		return (&mcp.CommandTransport{Command: cmd}).Connect(ctx)
	}
	clientConn, err := (&mcp.StdioTransport{}).Connect(ctx)
	if err != nil {
		log.Error("idem mcp", "err", err)
		return 1
	}
	if err := gw.Serve(ctx, clientConn, dial); err != nil {
		log.Error("idem mcp", "upstream", strings.Join(command, " "), "err", err)
		return 1
	}
	return 0
}

// serveMCPHTTP serves streamable HTTP on listen, each MCP session with its
// own connection to the upstream at url, until ctx ends.
func serveMCPHTTP(ctx context.Context, gw *mcpgate.Gateway, url, listen string, stdout io.Writer, log *slog.Logger) int {
	dial := func(ctx context.Context) (mcp.Connection, error) {
		return (&mcp.StreamableClientTransport{Endpoint: url}).Connect(ctx)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		log.Error("idem mcp", "err", err)
		return 1
	}
	h := gw.NewHTTPHandler(dial)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "idem mcp: listening on http://%s (upstream %s)\n", ln.Addr(), url)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	code := 0
	select {
	case <-ctx.Done():
	case err := <-errc:
		log.Error("idem mcp", "err", err)
		code = 1
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.Close(sctx) // ends the sessions, so their hanging GET streams let Shutdown finish
	srv.Shutdown(sctx)
	return code
}
