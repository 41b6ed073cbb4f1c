package canon

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/internal/publicdata"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

type goldenCase struct {
	name  string
	tool  string
	args  string // as the agent sent them: an object, or a string holding one
	tools string // file of tool definitions under the public data's upstream/, or ""
}

// goldenOutput is what a golden file holds: everything Canonicalize decides.
type goldenOutput struct {
	Tool           string  `json:"tool"`
	Canonical      string  `json:"canonical"`
	Hash           string  `json:"hash"`
	IdentityDigest string  `json:"identity_digest"`
	TextView       string  `json:"text_view"`
	Fields         []Field `json:"fields"`
}

// tauActions returns the first write action of each tool in a tau-bench
// task file, with its arguments as OpenAI sends them: a JSON string. It
// skips the test when the public data is absent.
func tauActions(t *testing.T, domain string, want map[string]bool) []goldenCase {
	t.Helper()
	data, err := os.ReadFile(publicdata.Path(t, "upstream", "tau-bench", domain, "tasks_test.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tasks []struct {
		Actions []struct {
			Name   string          `json:"name"`
			Kwargs json.RawMessage `json:"kwargs"`
		} `json:"actions"`
	}
	if err := json.Unmarshal(data, &tasks); err != nil {
		t.Fatal(err)
	}
	var out []goldenCase
	for _, task := range tasks {
		for _, a := range task.Actions {
			if !want[a.Name] {
				continue
			}
			delete(want, a.Name)
			s, _ := json.Marshal(string(a.Kwargs))
			out = append(out, goldenCase{
				name: "tau-" + domain + "-" + a.Name, tool: a.Name, args: string(s),
				tools: filepath.Join("tau-bench", domain, "tools.json"),
			})
		}
	}
	return out
}

// tauCases are real tau-bench calls with their tool schemas.
func tauCases(t *testing.T) []goldenCase {
	cases := tauActions(t, "airline", map[string]bool{
		"book_reservation": true, "cancel_reservation": true, "update_reservation_flights": true,
		"update_reservation_passengers": true, "send_certificate": true,
	})
	return append(cases, tauActions(t, "retail", map[string]bool{
		"exchange_delivered_order_items": true, "modify_pending_order_address": true,
		"return_delivered_order_items": true, "cancel_pending_order": true,
	})...)
}

// goldenCases need no tau-bench task file: MCP calls on real
// github-mcp-server tool schemas (arguments written for these tests: the
// snapshots hold schemas, not calls), and calls without a schema.
func goldenCases() []goldenCase {
	snaps := "github-mcp-server/__toolsnaps__/"
	return []goldenCase{
		{"mcp-create_issue", "create_issue", `{"owner":"acme","repo":"billing","title":"Refund job double-charges cards on retry","body":"When the refund worker times out, the agent retries and the card is charged twice.\n\nSeen on 2024-05-01."}`, snaps + "create_issue.snap"},
		{"mcp-issue_write", "issue_write", `{"method":"update","owner":"acme","repo":"billing","issue_number":42,"state":"closed","state_reason":"duplicate","duplicate_of":17,"labels":["bug","payments"]}`, snaps + "issue_write.snap"},
		{"mcp-push_files", "push_files", `{"owner":"acme","repo":"site","branch":"main","message":"Add the pricing page and fix the footer link","files":[{"path":"pricing.html","content":"<h1>Pricing</h1>"},{"path":"footer.html","content":"<a href=\"/about\">About</a>"}]}`, snaps + "push_files.snap"},
		{"mcp-merge_pull_request", "merge_pull_request", `{"owner":"acme","repo":"api","pullNumber":7,"merge_method":"squash","commit_title":"Rate limiter","commit_message":"Adds a token bucket in front of the public API."}`, snaps + "merge_pull_request.snap"},
		{"mcp-add_issue_comment", "add_issue_comment", `{"owner":"acme","repo":"api","issue_number":12,"body":"Fixed in #13, thanks for the report!"}`, snaps + "add_issue_comment.snap"},
		// No schema: heuristics alone, with volatile fields.
		{"heuristics-send_email", "send_email", `{"to":["ann@example.com"],"subject":"Your invoice for May","body":"Hi Ann,\nyour invoice is attached.\nBest, Bob","request_id":"7f1c","attachments":[{"path":"/invoices/2024-05.pdf"}],"send_at":"2024-06-01T09:00:00Z"}`, ""},
		{"heuristics-run_command", "run_command", `{"cmd":"rm -rf /tmp/build","cwd":"/home/ci","timeout_ms":30000,"reason":"clean the build directory before the release build"}`, ""},
	}
}

func TestGolden(t *testing.T) {
	t.Run("tau-bench", func(t *testing.T) {
		for _, tc := range tauCases(t) {
			t.Run(tc.name, func(t *testing.T) { checkGolden(t, tc) })
		}
	})
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) { checkGolden(t, tc) })
	}
}

// checkGolden compares what Canonicalize decides for tc with its golden
// file (rewritten with -update).
func checkGolden(t *testing.T, tc goldenCase) {
	cfg := DefaultConfig()
	if tc.tools != "" {
		data, err := os.ReadFile(publicdata.Path(t, "upstream", tc.tools))
		if err != nil {
			t.Fatal(err)
		}
		tools, err := ParseTools(data)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Tools = map[string]ToolConfig{}
		for _, tl := range tools {
			cfg.Tools[tl.Name] = ToolConfig{Schema: tl.Schema}
		}
		if _, ok := cfg.Tools[tc.tool]; !ok {
			t.Fatalf("%s defines no tool %s", tc.tools, tc.tool)
		}
	}
	call := mustCanon(t, mustNew(t, cfg), tc.tool, tc.args)
	out := goldenOutput{
		Tool: call.Tool, Canonical: string(call.Canonical),
		Hash: fmt.Sprintf("%016x", call.Hash), IdentityDigest: fmt.Sprintf("%016x", call.IdentityDigest),
		TextView: call.TextView(), Fields: call.Fields,
	}
	var got bytes.Buffer
	enc := json.NewEncoder(&got)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", tc.name+".golden")
	if *update {
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./canon -run TestGolden -update)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("%s differs from the golden file; diff it or rerun with -update:\n%s", path, got.Bytes())
	}
}
