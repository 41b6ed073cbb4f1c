// Package mcpgate puts idem in front of one MCP server: an MCP server
// that relays every message between an MCP client and the upstream server
// unchanged, except tools/call, which it checks with idem first.
//
// A tools/call is checked (Backend.Check) and then:
//
//   - execute: forwarded to the upstream; its answer is recorded
//     (Complete, or Fail for an error result or a JSON-RPC error, transient
//     or permanent by its content) and relayed to the client unchanged;
//   - duplicate: answered with the recorded result (or recorded error)
//     without calling the upstream; _meta says it was replayed. A read-only
//     tool's result is replayed only while no write ran in the session
//     since it was recorded; otherwise the read is forwarded again;
//   - confirm, uncertain, in_progress: answered with a tool error result
//     whose text tells the model what happened and how to go on (re-read
//     state, or call again with the reserved argument "idem_confirmed"
//     naming the earlier call). Nothing is dropped silently.
//
// Keys: the client's _meta.idempotencyKey when it sends one; otherwise
// every call gets a fresh key (workflow = the idem session, step = the
// call's number in it) and the funnel's exact and semantic stages find
// retries among the session's calls. Each MCP session is one idem
// session.
//
// The tool list is passed through unchanged; the gateway also lists the
// upstream's tools itself (after the client's initialization, and again
// on notifications/tools/list_changed) and hands the definitions to the
// backend: their schemas decide field classes, their annotations
// (readOnlyHint, destructiveHint, idempotentHint) policies.
//
// When the upstream exits or its reply cannot be read while a call is in
// flight, the call's effect is unknown: the gateway answers it with a tool
// error saying so, remembers the key as lost, and answers a retry
// uncertain (the ledger does too once the lease ends). A stdio upstream
// that exited is started again on the next message, its initialization
// replayed from the client's.
//
// The relay works on JSON-RPC messages (the Go SDK's transports and
// Connection), not on the SDK's typed server: a typed server would answer
// initialize, resources, prompts and notifications itself, and the
// gateway must pass them through as the upstream wrote them.
package mcpgate

import (
	"context"
	crand "crypto/rand"
	"errors"
	"io"
	"log/slog"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/idem-dev/idem/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config configures a Gateway. Start from DefaultConfig.
type Config struct {
	// Session, when set, is the idem session of every MCP session (a
	// desktop client restarting `idem mcp` keeps its session); empty gives
	// each MCP session a fresh one.
	Session string
	// CallTimeout bounds the wait for the upstream's answer to a forwarded
	// tools/call. While the gateway waits it renews the call's lease every
	// third of it, so a call that runs longer than its lease keeps its key
	// (a twin waits for it instead of being answered uncertain).
	CallTimeout time.Duration
	// Wait is how long a check waits for a twin in flight (wait_ms) before
	// answering in_progress.
	Wait time.Duration
	// ToolsTimeout bounds how long a tools/call waits for the upstream's
	// tool list before it is checked without it.
	ToolsTimeout time.Duration
	// MaxLost bounds the keys remembered as lost (their execution's
	// outcome unknown).
	MaxLost int
	// Logger receives keys, tools, decisions and stages, never arguments
	// or results; nil discards.
	Logger *slog.Logger
	// Clock times the lease renewals; nil is the system clock. Tests
	// inject one.
	Clock client.Clock
}

// DefaultConfig returns a 2-minute call timeout, waits of 10 s for a twin,
// 10 s for the tool list, and 10,000 lost keys remembered.
func DefaultConfig() Config {
	return Config{CallTimeout: 2 * time.Minute, Wait: 10 * time.Second, ToolsTimeout: 10 * time.Second, MaxLost: 10_000}
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	switch {
	case c.CallTimeout <= 0:
		return errors.New("mcpgate config: CallTimeout must be positive")
	case c.Wait < 0:
		return errors.New("mcpgate config: Wait is negative")
	case c.ToolsTimeout <= 0:
		return errors.New("mcpgate config: ToolsTimeout must be positive")
	case c.MaxLost < 1:
		return errors.New("mcpgate config: MaxLost must be at least 1")
	}
	return nil
}

// A Dialer connects to the upstream MCP server: it spawns the command of
// a stdio upstream, or opens a streamable HTTP connection. A stdio
// upstream that exited is dialed again.
type Dialer func(ctx context.Context) (mcp.Connection, error)

// Gateway relays MCP sessions to an upstream through idem. It is safe for
// concurrent use: each Serve is one session.
type Gateway struct {
	cfg     Config
	clock   client.Clock
	backend Backend
	log     *slog.Logger
	tools   *toolSet
	lost    *lru.Cache[string, struct{}] // keys whose execution's outcome is unknown
}

// New returns a Gateway deciding with b.
func New(cfg Config, b Backend) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if b == nil {
		return nil, errors.New("mcpgate: a Backend is required")
	}
	lost, err := lru.New[string, struct{}](cfg.MaxLost)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	clock := cfg.Clock
	if clock == nil {
		clock = client.SystemClock
	}
	return &Gateway{cfg: cfg, clock: clock, backend: b, log: log, tools: newToolSet(), lost: lost}, nil
}

// Serve relays one MCP session between clientConn and an upstream from
// dial until the client's connection ends or ctx is done, then closes
// both connections and waits for the session's calls.
func (g *Gateway) Serve(ctx context.Context, clientConn mcp.Connection, dial Dialer) error {
	id := g.cfg.Session
	if id == "" {
		id = "mcp-" + crand.Text()
	}
	return g.serve(ctx, clientConn, dial, id)
}

func (g *Gateway) markLost(key string) {
	if key != "" {
		g.lost.Add(key, struct{}{})
	}
}

func (g *Gateway) isLost(keys ...string) bool {
	for _, k := range keys {
		if k != "" && g.lost.Contains(k) {
			return true
		}
	}
	return false
}
