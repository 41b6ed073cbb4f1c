package mcpgate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem/mcpgate"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStreamableHTTP fronts a streamable HTTP upstream (Go SDK) with the
// gateway's HTTP handler and drives it with the SDK's HTTP client.
func TestStreamableHTTP(t *testing.T) {
	var sends atomic.Int32
	srv := mcp.NewServer(&mcp.Implementation{Name: "http-upstream", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "send"}, func(ctx context.Context, req *mcp.CallToolRequest, a sendArgs) (*mcp.CallToolResult, any, error) {
		sends.Add(1)
		return text("sent to " + a.To), nil, nil
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer up.Close()

	local, _ := newLocal(t)
	gw, err := mcpgate.New(mcpgate.DefaultConfig(), local)
	if err != nil {
		t.Fatal(err)
	}
	h := gw.NewHTTPHandler(func(ctx context.Context) (mcp.Connection, error) {
		return (&mcp.StreamableClientTransport{Endpoint: up.URL}).Connect(ctx)
	})
	front := httptest.NewServer(h)
	defer func() { front.Close(); h.Close(context.Background()) }()

	ctx := context.Background()
	for _, name := range []string{"first client", "second client"} {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: front.URL}, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		args := map[string]any{"to": "ann@example.com", "body": "hello"}
		for range 2 {
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "send", Arguments: args})
			if err != nil || r.IsError || resultText(r) != "sent to ann@example.com" {
				t.Fatalf("%s: %v %v", name, err, r)
			}
		}
		cs.Close()
	}
	// One send per MCP session: the retry in each was replayed; the two
	// sessions are two idem sessions.
	if n := sends.Load(); n != 2 {
		t.Errorf("the upstream received %d sends, want 2 (one per session)", n)
	}
}
