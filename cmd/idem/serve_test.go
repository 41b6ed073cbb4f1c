package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startServe runs `idem serve` in this process with the given
// environment and returns its URL; the test's cleanup stops it (as
// SIGINT would) and waits for it to exit.
func startServe(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	t.Setenv("IDEM_LISTEN", "127.0.0.1:0")
	t.Setenv("IDEM_DATA_DIR", t.TempDir())
	t.Setenv("IDEM_STORE_SYNC_WRITES", "false")
	t.Setenv("IDEM_CONFIG", "")
	for k, v := range env {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	old := serveContext
	serveContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code := run(append([]string{"serve"}, args...), strings.NewReader(""), pw, io.Discard)
		pw.Close()
		done <- code
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	go io.Copy(io.Discard, pr)
	serveContext = old
	if err != nil {
		cancel()
		t.Fatalf("serve printed no address (exit %d): %v", <-done, err)
	}
	_, rest, _ := strings.Cut(line, "listening on ")
	url, _, _ := strings.Cut(rest, " ")
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve exited %d", code)
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	})
	return url
}

func TestServeAndCheck(t *testing.T) {
	url := startServe(t, nil)
	resp, err := http.Get(url + "/readyz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz: %v %v", resp, err)
	}
	resp.Body.Close()

	call := `{"session_id":"s1","workflow_id":"wf","step_id":"1","tool":"send_email","arguments":{"to":"ann@example.com","body":"Hello Ann, here is your invoice."}}`
	code, out, errs := runIdem(t, "", "check", "--server", url, call)
	if code != 0 || !strings.Contains(out, "decision  execute") || !strings.Contains(out, "token") {
		t.Fatalf("first check: exit %d\n%s%s", code, out, errs)
	}
	// The same key again, from stdin: in progress, flagged.
	code, out, _ = runIdem(t, call, "check", "--server", url, "--json")
	if code != exitFlagged || !strings.Contains(out, `"decision": "in_progress"`) {
		t.Errorf("second check: exit %d\n%s", code, out)
	}
	// Bad input: exit 2, naming the field.
	code, _, errs = runIdem(t, "", "check", "--server", url, `{"tool":"t","arguments":{}}`)
	if code != 2 || !strings.Contains(errs, "session_id") {
		t.Errorf("bad input: exit %d: %s", code, errs)
	}
	code, _, errs = runIdem(t, "", "check", "--server", url, `{"sesion":"x"}`)
	if code != 2 || !strings.Contains(errs, "sesion") {
		t.Errorf("unknown field: exit %d: %s", code, errs)
	}
}

func TestServeWithKeys(t *testing.T) {
	dir := t.TempDir()
	code, out, _ := runIdem(t, "", "key", "--tenant", "acme")
	if code != 0 {
		t.Fatal(out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	key := lines[0]
	if !strings.HasPrefix(key, "idem_") || len(key) < 30 {
		t.Fatalf("key %q", key)
	}
	if want := fmt.Sprintf("%x", sha256.Sum256([]byte(key))); !strings.Contains(lines[2], want) || !strings.Contains(lines[2], `"acme"`) {
		t.Fatalf("config line %q does not hold the key's hash", lines[2])
	}
	cfg := filepath.Join(dir, "idem.yaml")
	if err := os.WriteFile(cfg, []byte("auth:\n  keys:\n"+lines[2]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runIdem(t, "", "config", "check", cfg); code != 0 || !strings.Contains(out, "tenant: acme") {
		t.Fatalf("config check: %d %s %s", code, out, errs)
	}
	url := startServe(t, nil, "--config", cfg)
	call := `{"session_id":"s1","idempotency_key":"k1","tool":"t","arguments":{"a":1}}`
	t.Setenv("IDEM_API_KEY", "")
	if code, _, errs := runIdem(t, "", "check", "--server", url, call); code != 2 || !strings.Contains(errs, "401") {
		t.Errorf("without the key: exit %d %s", code, errs)
	}
	t.Setenv("IDEM_API_KEY", key)
	if code, out, errs := runIdem(t, "", "check", "--server", url, call); code != 0 {
		t.Errorf("with the key: exit %d %s %s", code, out, errs)
	}
}

func TestServeRefusesPublicWithoutKeys(t *testing.T) {
	t.Setenv("IDEM_LISTEN", "0.0.0.0:0")
	t.Setenv("IDEM_DATA_DIR", t.TempDir())
	t.Setenv("IDEM_CONFIG", "")
	code, _, errs := runIdem(t, "", "serve")
	if code != 2 || !strings.Contains(errs, "IDEM_LISTEN") || !strings.Contains(errs, "loopback") {
		t.Errorf("exit %d: %s", code, errs)
	}
}

func TestCheckLocal(t *testing.T) {
	t.Setenv("IDEM_STORE_SYNC_WRITES", "false")
	t.Setenv("IDEM_CONFIG", "")
	dir := t.TempDir()
	call := `{"session_id":"s1","workflow_id":"wf","step_id":"1","tool":"charge","arguments":{"amount":10,"card":"c1"}}`
	code, out, errs := runIdem(t, "", "check", "--local", dir, call)
	if code != 0 || !strings.Contains(out, "decision  execute") {
		t.Fatalf("first: exit %d\n%s%s", code, out, errs)
	}
	// The same call at another step: the exact stage flags it.
	code, out, _ = runIdem(t, "", "check", "--local", dir, strings.Replace(call, `"step_id":"1"`, `"step_id":"2"`, 1))
	if code != exitFlagged || !strings.Contains(out, "stage     exact") {
		t.Errorf("second: exit %d\n%s", code, out)
	}
	code, _, errs = runIdem(t, "", "check", "--local", dir, `{"session_id":"s","idempotency_key":"k","tool":"t","arguments":[1]}`)
	if code != 2 || !strings.Contains(errs, "arguments") {
		t.Errorf("bad arguments: exit %d %s", code, errs)
	}
}

func TestConfigCommand(t *testing.T) {
	t.Setenv("IDEM_LISTEN", "")
	os.Unsetenv("IDEM_LISTEN")
	code, out, errs := runIdem(t, "", "config", "check", "../../idem.example.yaml")
	if code != 0 || !strings.Contains(out, "listen: 127.0.0.1:8080") || !strings.Contains(out, "name: email") {
		t.Fatalf("example: exit %d\n%s%s", code, out, errs)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("listen: 127.0.0.1:1\nembedder:\n  provider: opneai\nstore:\n  sync_write: true\n"), 0o600)
	code, _, errs = runIdem(t, "", "config", "check", bad)
	if code != 2 || !strings.Contains(errs, "line 5: store.sync_write") {
		t.Errorf("bad file: exit %d: %s", code, errs)
	}
	code, out, _ = runIdem(t, "", "config", "env")
	if code != 0 || !strings.Contains(out, "IDEM_DATA_DIR") {
		t.Errorf("env: %d %s", code, out)
	}
	if code, _, _ := runIdem(t, "", "key"); code != 2 {
		t.Errorf("key without tenant: exit %d", code)
	}
}

// TestServeMetricToolLabels: /metrics labels checks with the tool's name
// when the config names it (in the tools file, in tools.rules, or exactly
// in a policy) and as "other" otherwise, so the label stays bounded.
func TestServeMetricToolLabels(t *testing.T) {
	dir := t.TempDir()
	tools := `[{"type":"function","function":{"name":"book_flight","parameters":{"type":"object","properties":{"flight":{"type":"string"}}}}},
	{"name":"create_issue","inputSchema":{"type":"object","properties":{"title":{"type":"string"}}},"annotations":{"readOnlyHint":false}}]`
	if err := os.WriteFile(filepath.Join(dir, "tools.json"), []byte(tools), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "idem.yaml")
	yaml := "tools:\n  file: tools.json\n  rules:\n    send_email:\n      fields: {body: {class: text}}\n" +
		"policies:\n  - name: payments\n    tools: [charge_card, refund_*]\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	url := startServe(t, map[string]string{"IDEM_EMBEDDER_PROVIDER": "none"}, "--config", cfg)
	for i, tool := range []string{"book_flight", "create_issue", "send_email", "charge_card", "refund_order", "delete_repo"} {
		call := fmt.Sprintf(`{"session_id":"s1","workflow_id":"wf","step_id":"%d","tool":%q,"arguments":{"n":%d}}`, i, tool, i)
		if code, out, errs := runIdem(t, "", "check", "--server", url, call); code != 0 {
			t.Fatalf("check %s: exit %d %s %s", tool, code, out, errs)
		}
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	label := func(tool string) string {
		return fmt.Sprintf(`idem_checks_total{decision="execute",stage="new",tenant="default",tool=%q}`, tool)
	}
	for tool, want := range map[string]string{
		"book_flight": "1", "create_issue": "1", "send_email": "1", "charge_card": "1",
		"other": "2", // refund_order (only a glob names it) and delete_repo
	} {
		if !strings.Contains(string(body), label(tool)+" "+want+"\n") {
			t.Errorf("/metrics lacks %s %s", label(tool), want)
		}
	}
	for _, tool := range []string{"refund_order", "delete_repo"} {
		if strings.Contains(string(body), `tool="`+tool+`"`) {
			t.Errorf("/metrics labels %s, which the config does not name", tool)
		}
	}
}

// TestServeSyncMetrics: with store.sync_writes on, /metrics carries the
// store's sync rounds, and a check that claimed and its completion were
// operations of them; with it off, there are none to report.
func TestServeSyncMetrics(t *testing.T) {
	metric := func(body, name string) (float64, bool) {
		for line := range strings.Lines(body) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				return f, err == nil
			}
		}
		return 0, false
	}
	names := []string{"idem_store_sync_rounds_total", "idem_store_sync_operations_total", "idem_store_sync_seconds_total", "idem_store_sync_wait_seconds_total"}
	for _, sync := range []string{"true", "false"} {
		t.Run("sync_writes="+sync, func(t *testing.T) {
			url := startServe(t, map[string]string{"IDEM_EMBEDDER_PROVIDER": "none", "IDEM_STORE_SYNC_WRITES": sync})
			call := `{"session_id":"s1","workflow_id":"wf","step_id":"1","tool":"charge","arguments":{"n":1}}`
			code, out, errs := runIdem(t, "", "check", "--server", url, call)
			if code != 0 {
				t.Fatalf("check: exit %d %s %s", code, out, errs)
			}
			resp, err := http.Get(url + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, name := range names {
				v, ok := metric(string(body), name)
				switch {
				case sync == "false" && ok:
					t.Errorf("sync writes off, /metrics has %s %v", name, v)
				case sync == "true" && !ok:
					t.Errorf("/metrics lacks %s", name)
				case sync == "true" && name == "idem_store_sync_rounds_total" && v < 1:
					t.Errorf("%s %v after a claim, want at least 1", name, v)
				case sync == "true" && name == "idem_store_sync_operations_total" && v < 1:
					t.Errorf("%s %v after a claim, want at least 1", name, v)
				}
			}
		})
	}
}

// TestServeDebugListen: with debug_listen, Go's profiles are served on that
// address and never on the API's; a public address is refused at start.
func TestServeDebugListen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	url := startServe(t, map[string]string{"IDEM_DEBUG_LISTEN": addr})
	get := func(u string) (int, string) {
		t.Helper()
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://" + addr + "/debug/pprof/heap?debug=1"); code != 200 || !strings.Contains(body, "heap profile") {
		t.Errorf("heap profile on debug_listen: %d %.80q", code, body)
	}
	if code, _ := get(url + "/debug/pprof/heap?debug=1"); code != 404 {
		t.Errorf("profiles on the API's address: %d, want 404", code)
	}

	t.Setenv("IDEM_DEBUG_LISTEN", "0.0.0.0:6060")
	t.Setenv("IDEM_CONFIG", "")
	if code, _, errs := runIdem(t, "", "serve"); code != 2 || !strings.Contains(errs, "IDEM_DEBUG_LISTEN") || !strings.Contains(errs, "loopback") {
		t.Errorf("public debug_listen: exit %d: %s", code, errs)
	}
}
