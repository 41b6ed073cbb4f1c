package mcpgate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests' upstream is this test binary run again with upstreamEnv set:
// an MCP server on stdio written with the Go SDK, whose tools append their
// name to the file calls in the directory upstreamDirEnv names, so a test
// sees every call the upstream received.
const (
	upstreamEnv    = "IDEM_MCPGATE_TEST_UPSTREAM"
	upstreamDirEnv = "IDEM_MCPGATE_TEST_DIR"
)

func TestMain(m *testing.M) {
	if os.Getenv(upstreamEnv) == "1" {
		if err := runUpstream(os.Getenv(upstreamDirEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "test upstream:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type sendArgs struct {
	To   string `json:"to" jsonschema:"the recipient's address"`
	Body string `json:"body" jsonschema:"the message"`
}

type idArgs struct {
	ID string `json:"id" jsonschema:"the record's id"`
}

type noArgs struct{}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func toolError(s string) *mcp.CallToolResult {
	r := text(s)
	r.IsError = true
	return r
}

func runUpstream(dir string) error {
	calls := filepath.Join(dir, "calls")
	log := func(tool string) int {
		f, err := os.OpenFile(calls, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			panic(err)
		}
		fmt.Fprintln(f, tool)
		f.Close()
		return countCalls(dir, "")
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "1.0.0"}, nil)
	no, yes := false, true
	mcp.AddTool(srv, &mcp.Tool{Name: "send", Description: "Send a message",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: &no}},
		func(ctx context.Context, req *mcp.CallToolRequest, a sendArgs) (*mcp.CallToolResult, any, error) {
			n := log("send")
			return text(fmt.Sprintf("sent to %s (call %d)", a.To, n)), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Description: "Read a record",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: &no, OpenWorldHint: &yes}},
		func(ctx context.Context, req *mcp.CallToolRequest, a idArgs) (*mcp.CallToolResult, any, error) {
			n := log("lookup")
			return text(fmt.Sprintf("record %s, version %d", a.ID, n)), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "flaky", Description: "Fails once, then works"},
		func(ctx context.Context, req *mcp.CallToolRequest, a sendArgs) (*mcp.CallToolResult, any, error) {
			log("flaky")
			if countCalls(dir, "flaky") == 1 {
				return toolError("the mail service is temporarily unavailable (status 503)"), nil, nil
			}
			return text("sent to " + a.To), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "reject", Description: "Always fails for good"},
		func(ctx context.Context, req *mcp.CallToolRequest, a idArgs) (*mcp.CallToolResult, any, error) {
			log("reject")
			return toolError("order " + a.ID + " not found"), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "crash", Description: "Exits mid-call"},
		func(ctx context.Context, req *mcp.CallToolRequest, a idArgs) (*mcp.CallToolResult, any, error) {
			log("crash")
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "garbage", Description: "Writes a line that is not JSON-RPC"},
		func(ctx context.Context, req *mcp.CallToolRequest, a idArgs) (*mcp.CallToolResult, any, error) {
			log("garbage")
			os.Stdout.WriteString("Server ready! (a stray console.log)\n")
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "hang", Description: "Answers once the file release exists"},
		func(ctx context.Context, req *mcp.CallToolRequest, a idArgs) (*mcp.CallToolResult, any, error) {
			log("hang")
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					log("cancelled")
					return nil, nil, ctx.Err()
				case <-tick.C:
					if _, err := os.Stat(filepath.Join(dir, "release")); err == nil {
						return text("finished late: " + a.ID), nil, nil
					}
				}
			}
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "stuck", Description: "Ignores cancellation; answers once the file release exists"},
		func(ctx context.Context, req *mcp.CallToolRequest, a idArgs) (*mcp.CallToolResult, any, error) {
			log("stuck")
			for {
				if _, err := os.Stat(filepath.Join(dir, "release")); err == nil {
					return text("finished late: " + a.ID), nil, nil
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "progress", Description: "Reports progress twice"},
		func(ctx context.Context, req *mcp.CallToolRequest, a idArgs) (*mcp.CallToolResult, any, error) {
			log("progress")
			if tok := req.Params.GetProgressToken(); tok != nil {
				for i := 1; i <= 2; i++ {
					req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 2})
				}
			}
			return text("done " + a.ID), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "ask", Description: "Asks the client's model (sampling, in two round trips)"},
		func(ctx context.Context, req *mcp.CallToolRequest, a idArgs) (*mcp.CallToolResult, any, error) {
			log("ask")
			if r, ok := req.Params.InputResponses["colour"]; ok {
				var answer struct {
					Content struct {
						Text string `json:"text"`
					} `json:"content"`
				}
				b, _ := json.Marshal(r)
				json.Unmarshal(b, &answer)
				return text("the model said: " + answer.Content.Text), nil, nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"colour": &mcp.CreateMessageParams{
				Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "name a colour"}}},
				MaxTokens: 10,
			}}}, nil, nil
		})
	srv.AddResource(&mcp.Resource{URI: "test://greeting", Name: "greeting", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://greeting", Text: "hello from upstream"}}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "greet", Description: "Greets"},
		func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "say hello"}}}}, nil
		})
	return srv.Run(context.Background(), &mcp.StdioTransport{})
}

// countCalls counts the calls of tool ("" for all) the upstream received.
func countCalls(dir, tool string) int {
	data, err := os.ReadFile(filepath.Join(dir, "calls"))
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if l != "" && (tool == "" || l == tool) {
			n++
		}
	}
	return n
}
