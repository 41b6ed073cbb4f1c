package mcpgate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/config"
	"github.com/idem-dev/idem/embed"
	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/ledger/badger"
	"github.com/idem-dev/idem/mcpgate"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// benchUpstream is an in-process MCP server (Go SDK) on an in-memory
// transport: the round trip every sub-benchmark pays.
func benchUpstream(ctx context.Context) (mcp.Connection, error) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench-upstream", Version: "1"}, nil)
	type args struct {
		To   string `json:"to"`
		Body string `json:"body,omitempty"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "send"}, func(ctx context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		return text("sent to " + a.To), nil, nil
	})
	a, b := mcp.NewInMemoryTransports()
	if _, err := srv.Connect(ctx, a, nil); err != nil {
		return nil, err
	}
	return b.Connect(ctx)
}

// benchLocal is an in-process backend on Badger in b.TempDir, with the
// built-in encoder when withEncoder.
func benchLocal(b *testing.B, sync, withEncoder bool) mcpgate.Backend {
	bc := badger.DefaultConfig(b.TempDir())
	bc.SyncWrites = sync
	st, err := badger.Open(bc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close(context.Background()) })
	led, err := ledger.New(st, ledger.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	cfg := config.Default()
	var deps funnel.Deps
	if withEncoder {
		use, err := embed.NewUSE(embed.DefaultUSEConfig())
		if err != nil {
			b.Fatal(err)
		}
		deps.Embedder = use
	}
	local, err := mcpgate.NewLocal(led, config.DefaultTenant, func(defs []canon.Tool) (*funnel.Funnel, error) {
		cn, err := canon.New(cfg.Canon(defs))
		if err != nil {
			return nil, err
		}
		fc := funnel.DefaultConfig()
		fc.Budget = time.Minute
		fc.Tools = cfg.FunnelTools(defs)
		d := deps
		d.Canon, d.Ledger = cn, led
		return funnel.New(fc, d)
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { local.Close(context.Background()) })
	return local
}

// BenchmarkToolsCall: a tools/call that executes (new arguments every
// time), straight to the upstream vs through the gateway. The difference
// is what idem mcp adds: parsing the call, the check (canon, key, exact,
// semantic, claim), forwarding, and the completion.
func BenchmarkToolsCall(b *testing.B) {
	ctx := context.Background()
	run := func(b *testing.B, cs *mcp.ClientSession, withText bool) {
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			args := map[string]any{"to": fmt.Sprintf("user%d@example.com", i)}
			if withText {
				args["body"] = fmt.Sprintf("Hello, this is reminder number %d about your appointment.", i)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "send", Arguments: args})
			if err != nil || res.IsError {
				b.Fatalf("call %d: %v %v", i, err, res)
			}
		}
	}
	connect := func(b *testing.B, t mcp.Transport) *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, t, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cs.Close() })
		return cs
	}
	through := func(b *testing.B, backend mcpgate.Backend) *mcp.ClientSession {
		gw, err := mcpgate.New(mcpgate.DefaultConfig(), backend)
		if err != nil {
			b.Fatal(err)
		}
		clientEnd, gateEnd := mcp.NewInMemoryTransports()
		gctx, cancel := context.WithCancel(ctx)
		gconn, err := gateEnd.Connect(gctx)
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan struct{})
		go func() { gw.Serve(gctx, gconn, benchUpstream); close(done) }()
		cs := connect(b, clientEnd)
		b.Cleanup(func() { cs.Close(); cancel(); <-done })
		return cs
	}
	for _, withText := range []bool{false, true} {
		name := "identity-only"
		if withText {
			name = "with-text"
		}
		b.Run(name+"/direct", func(b *testing.B) {
			conn, err := benchUpstream(ctx)
			if err != nil {
				b.Fatal(err)
			}
			run(b, connect(b, connTransport{conn}), withText)
		})
		b.Run(name+"/gateway-sync-off", func(b *testing.B) { run(b, through(b, benchLocal(b, false, withText)), withText) })
		b.Run(name+"/gateway-sync-on", func(b *testing.B) { run(b, through(b, benchLocal(b, true, withText)), withText) })
	}
}
