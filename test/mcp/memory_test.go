// Package mcp drives a real MCP server from npm,
// @modelcontextprotocol/server-memory (a knowledge graph whose
// create_entities and add_observations are writes, read_graph,
// search_nodes and open_nodes reads), through the `idem mcp` binary with
// the Go SDK's client, as a desktop MCP client would.
//
// scripts/test installs the server with npm into a cache folder outside
// the repository and sets IDEM_TEST_MCP_MEMORY to its dist/index.js;
// without it (or without node) the tests skip and say why. Every message
// the gateway sends the server is copied to a log (tee in front of node),
// so a test counts the calls the server really received.
package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// memoryEnv names the server's entry point (dist/index.js).
const memoryEnv = "IDEM_TEST_MCP_MEMORY"

var (
	buildOnce sync.Once
	idemBin   string
	buildErr  error
)

// idem builds cmd/idem once for the package's tests.
func idem(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "idem-mcp-test-")
		if err != nil {
			buildErr = err
			return
		}
		idemBin = filepath.Join(dir, "idem")
		out, err := exec.Command("go", "build", "-o", idemBin, "github.com/idem-dev/idem/cmd/idem").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build cmd/idem: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return idemBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if idemBin != "" {
		os.RemoveAll(filepath.Dir(idemBin))
	}
	os.Exit(code)
}

// memoryServer returns node and the server's entry point, or skips.
func memoryServer(t *testing.T) (node, index string) {
	t.Helper()
	index = os.Getenv(memoryEnv)
	if index == "" {
		t.Skipf("%s is not set: run scripts/test (it installs @modelcontextprotocol/server-memory with npm) or set it to the package's dist/index.js", memoryEnv)
	}
	if _, err := os.Stat(index); err != nil {
		t.Skipf("%s=%s: %v", memoryEnv, index, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH: the npm MCP server cannot run")
	}
	return node, index
}

// gateway is one `idem mcp` process fronting the memory server, and a
// Go SDK client connected to it.
type gateway struct {
	t      *testing.T
	dir    string
	memory string // the server's knowledge-graph file
	wire   string // what the gateway wrote to the server
	cs     *mcp.ClientSession
}

// config is the gateway's idem config: a large budget, since a test
// asserts semantic decisions and must not depend on the machine's speed.
const config = `budget: 20s
store: {sync_writes: false}
log: {level: warn}
`

func startGateway(t *testing.T) *gateway {
	t.Helper()
	node, index := memoryServer(t)
	bin := idem(t)
	g := &gateway{t: t, dir: t.TempDir()}
	g.memory = filepath.Join(g.dir, "memory.jsonl")
	g.wire = filepath.Join(g.dir, "wire.log")
	cfg := filepath.Join(g.dir, "idem.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	upstream := fmt.Sprintf("tee -a %q | exec %q %q", g.wire, node, index)
	cmd := exec.Command(bin, "mcp", "--data", filepath.Join(g.dir, "ledger"), "--config", cfg, "--", "sh", "-c", upstream)
	cmd.Env = append(os.Environ(), "MEMORY_FILE_PATH="+g.memory)
	cmd.Stderr = testLog{t}
	g.cs = connect(t, cmd)
	return g
}

func connect(t *testing.T, cmd *exec.Cmd) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "idem-e2e", Version: "1.0.0"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v", cmd.Path, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func (g *gateway) call(name string, args any) *mcp.CallToolResult {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		g.t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// upstreamCalls counts the tools/call requests of tool the server received.
func (g *gateway) upstreamCalls(tool string) int {
	data, _ := os.ReadFile(g.wire)
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(line), &msg) == nil && msg.Method == "tools/call" && msg.Params.Name == tool {
			n++
		}
	}
	return n
}

func text(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func meta(r *mcp.CallToolResult, key string) string {
	s, _ := r.Meta[key].(string)
	return s
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var ann = map[string]any{"entities": []map[string]any{{
	"name": "Ann Lee", "entityType": "person", "observations": []string{"works at Acme as a buyer"},
}}}

func TestToolListUnchanged(t *testing.T) {
	g := startGateway(t)
	node, index := memoryServer(t)
	direct := exec.Command(node, index)
	direct.Env = append(os.Environ(), "MEMORY_FILE_PATH="+filepath.Join(t.TempDir(), "m.jsonl"))
	ds := connect(t, direct)
	ctx := context.Background()
	through, err := g.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ds.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(through)
	b, _ := json.Marshal(want)
	if string(a) != string(b) {
		t.Errorf("tools/list through idem mcp:\n%s\nstraight from the server:\n%s", a, b)
	}
	if len(want.Tools) < 9 {
		t.Errorf("the server listed %d tools, want its 9", len(want.Tools))
	}
}

func TestExactRetryGetsRecordedResult(t *testing.T) {
	g := startGateway(t)
	first := g.call("create_entities", ann)
	if first.IsError || !strings.Contains(text(first), "Ann Lee") {
		t.Fatalf("create_entities: %q", text(first))
	}
	retry := g.call("create_entities", ann)
	if n := g.upstreamCalls("create_entities"); n != 1 {
		t.Errorf("the server received %d create_entities, want 1", n)
	}
	// Run again, the server would answer [] (the entity exists): the
	// retry's answer is the recorded one.
	if text(retry) != text(first) || retry.Meta["idem/replayed"] != true {
		t.Errorf("the retry answered %q (%v), want the recorded %q", text(retry), retry.Meta, text(first))
	}
}

func TestRewordedWriteAsksToConfirm(t *testing.T) {
	g := startGateway(t)
	g.call("create_entities", ann)
	obs := func(s string) map[string]any {
		return map[string]any{"observations": []map[string]any{{"entityName": "Ann Lee", "contents": []string{s}}}}
	}
	first := g.call("add_observations", obs("Ann prefers to be contacted by email rather than by phone"))
	if first.IsError {
		t.Fatalf("add_observations: %q", text(first))
	}
	reworded := g.call("add_observations", obs("Ann would rather be contacted by email than by phone"))
	if !reworded.IsError || meta(reworded, "idem/decision") != "confirm" {
		t.Fatalf("the reworded write answered %q %v, want confirm", text(reworded), reworded.Meta)
	}
	if n := g.upstreamCalls("add_observations"); n != 1 {
		t.Errorf("the server received %d add_observations, want 1", n)
	}
	if !strings.Contains(text(reworded), "idem_confirmed") || !strings.Contains(text(reworded), meta(reworded, "idem/match")) {
		t.Errorf("the confirm does not say how to proceed: %q", text(reworded))
	}
	// Another entity's observation is not the same write.
	g.call("create_entities", map[string]any{"entities": []map[string]any{{"name": "Bo Chen", "entityType": "person", "observations": []string{}}}})
	bo := g.call("add_observations", map[string]any{"observations": []map[string]any{{"entityName": "Bo Chen",
		"contents": []string{"Bo would rather be contacted by email than by phone"}}}})
	if bo.IsError || g.upstreamCalls("add_observations") != 2 {
		t.Errorf("the same words for another entity were held back: %q %v", text(bo), bo.Meta)
	}

	// The model confirms: the call carries the earlier call's key.
	args := obs("Ann would rather be contacted by email than by phone")
	args["idem_confirmed"] = meta(reworded, "idem/match")
	confirmed := g.call("add_observations", args)
	if meta(confirmed, "idem/error") == "confirmed_unsupported" {
		t.Skipf("the confirmation is not passed on yet (the check's confirmed field, issue #18): %q", text(confirmed))
	}
	if confirmed.IsError || g.upstreamCalls("add_observations") != 3 {
		t.Errorf("a confirmed call answered %q %v (%d calls), want it run", text(confirmed), confirmed.Meta, g.upstreamCalls("add_observations"))
	}
}

func TestRepeatedReadReplayed(t *testing.T) {
	g := startGateway(t)
	g.call("create_entities", ann)
	q := map[string]any{"query": "Acme"}
	first := g.call("search_nodes", q)
	again := g.call("search_nodes", q)
	if n := g.upstreamCalls("search_nodes"); n != 1 || text(again) != text(first) {
		t.Errorf("a repeated read: the server received %d, answers %q / %q", n, text(first), text(again))
	}
}

func TestFailedCallRunsAgain(t *testing.T) {
	g := startGateway(t)
	// A knowledge-graph file the server cannot parse makes its writes fail.
	if err := os.WriteFile(g.memory, []byte("{not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	failed := g.call("create_entities", ann)
	if !failed.IsError {
		t.Fatalf("create_entities on a broken file answered %q, want the server's error", text(failed))
	}
	os.Remove(g.memory)
	retry := g.call("create_entities", ann)
	if retry.IsError || !strings.Contains(text(retry), "Ann Lee") || g.upstreamCalls("create_entities") != 2 {
		t.Errorf("the retry after a failure answered %q (%d calls), want it run again", text(retry), g.upstreamCalls("create_entities"))
	}
}

func TestResourcesPassThrough(t *testing.T) {
	g := startGateway(t)
	g.call("create_entities", ann)
	ctx := context.Background()
	rs, err := g.cs.ListResources(ctx, nil)
	if err != nil || len(rs.Resources) == 0 {
		t.Fatalf("resources/list: %v %+v", err, rs)
	}
	r, err := g.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: rs.Resources[0].URI})
	if err != nil || len(r.Contents) == 0 || !strings.Contains(r.Contents[0].Text, "Ann Lee") {
		t.Errorf("resources/read %s: %v %+v", rs.Resources[0].URI, err, r)
	}
}
