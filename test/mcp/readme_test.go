package mcp

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// TestReadmeDesktopConfig runs the README's desktop-client config as a
// client would: its command and args, with three substitutions that keep
// the test offline and in temporary folders: the built binary for "idem",
// node and the installed package for "npx -y @modelcontextprotocol/server-memory"
// (npx would download it), and a temporary --data directory.
func TestReadmeDesktopConfig(t *testing.T) {
	node, index := memoryServer(t)
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- mcp-config-example -->\\s*```json\\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no mcp-config-example block")
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(m[1], &cfg); err != nil {
		t.Fatalf("the README's config is not JSON: %v", err)
	}
	srv, ok := cfg.MCPServers["memory"]
	if !ok || srv.Command != "idem" {
		t.Fatalf("the README's config: %+v", cfg)
	}
	args := slices.Clone(srv.Args)
	dir := t.TempDir()
	for i, a := range args {
		if a == "--data" && i+1 < len(args) {
			args[i+1] = filepath.Join(dir, "ledger")
		}
	}
	sep := slices.Index(args, "--")
	if sep < 0 || !slices.Equal(args[sep+1:], []string{"npx", "-y", "@modelcontextprotocol/server-memory"}) {
		t.Fatalf("the README's upstream command changed: %q", args)
	}
	args = append(args[:sep+1], node, index)
	cmd := exec.Command(idem(t), args...)
	cmd.Env = append(os.Environ(), "MEMORY_FILE_PATH="+filepath.Join(dir, "memory.jsonl"))
	cmd.Stderr = testLog{t}
	g := &gateway{t: t, cs: connect(t, cmd)}
	first := g.call("create_entities", ann)
	retry := g.call("create_entities", ann)
	if first.IsError || text(retry) != text(first) || retry.Meta["idem/replayed"] != true {
		t.Errorf("through the README's config: %q, then %q %v", text(first), text(retry), retry.Meta)
	}
}
