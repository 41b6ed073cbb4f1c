package mcpgate_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/client"
	"github.com/idem-dev/idem/config"
	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/ledger/badger"
	"github.com/idem-dev/idem/mcpgate"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// harness is a gateway in this process with an in-process ledger (Badger
// in a temporary directory), fronting the test upstream as a subprocess,
// and a Go SDK client connected to it.
type harness struct {
	t      *testing.T
	dir    string // the upstream's directory (its calls file)
	cs     *mcp.ClientSession
	local  *mcpgate.Local
	ledger *ledger.Ledger

	mu       sync.Mutex // guards progress
	progress []float64
}

type harnessConfig struct {
	gate mcpgate.Config
	// clock, when set, is the ledger's, the funnel's and the gateway's.
	clock *fakeClock
	// sampling answers the upstream's sampling requests when set.
	sampling string
}

func newLocal(t *testing.T) (*mcpgate.Local, *ledger.Ledger) {
	return newLocalAt(t, nil)
}

// newLocalAt is newLocal on clk's time (the system's when nil).
func newLocalAt(t *testing.T, clk *fakeClock) (*mcpgate.Local, *ledger.Ledger) {
	t.Helper()
	bc := badger.DefaultConfig(t.TempDir())
	bc.SyncWrites = false
	st, err := badger.Open(bc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	lc := ledger.DefaultConfig()
	if clk != nil {
		lc.Now = clk.Now
	}
	led, err := ledger.New(st, lc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	local, err := mcpgate.NewLocal(led, config.DefaultTenant, func(defs []canon.Tool) (*funnel.Funnel, error) {
		cn, err := canon.New(cfg.Canon(defs))
		if err != nil {
			return nil, err
		}
		fc := funnel.DefaultConfig()
		fc.Budget = time.Minute // no decision here may depend on the machine's speed
		fc.Tools = cfg.FunnelTools(defs)
		if clk != nil {
			fc.Now = clk.Now
		}
		return funnel.New(fc, funnel.Deps{Canon: cn, Ledger: led})
	})
	if err != nil {
		t.Fatal(err)
	}
	return local, led
}

// upstreamDial starts the test upstream (this binary, see TestMain).
func upstreamDial(dir string) mcpgate.Dialer {
	return func(ctx context.Context) (mcp.Connection, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), upstreamEnv+"=1", upstreamDirEnv+"="+dir)
		cmd.Stderr = os.Stderr
		return (&mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}).Connect(ctx)
	}
}

func startHarness(t *testing.T, hc harnessConfig) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir()}
	h.local, h.ledger = newLocalAt(t, hc.clock)
	if hc.gate.CallTimeout == 0 {
		hc.gate = mcpgate.DefaultConfig()
	}
	if hc.clock != nil {
		hc.gate.Clock = hc.clock
	}
	hc.gate.Logger = slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	gw, err := mcpgate.New(hc.gate, h.local)
	if err != nil {
		t.Fatal(err)
	}
	clientEnd, gateEnd := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	gconn, err := gateEnd.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx, gconn, upstreamDial(h.dir)) }()
	opts := &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			h.mu.Lock()
			h.progress = append(h.progress, req.Params.Progress)
			h.mu.Unlock()
		},
	}
	if hc.sampling != "" {
		opts.CreateMessageHandler = func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "test", Role: "assistant", Content: &mcp.TextContent{Text: hc.sampling}}, nil
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1.0.0"}, opts)
	cs, err := c.Connect(ctx, clientEnd, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h.cs = cs
	t.Cleanup(func() {
		cs.Close()
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Serve did not return")
		}
	})
	return h
}

func (h *harness) call(name string, args map[string]any) *mcp.CallToolResult {
	h.t.Helper()
	return h.callMeta(name, args, nil)
}

func (h *harness) callMeta(name string, args map[string]any, meta mcp.Meta) *mcp.CallToolResult {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := h.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		h.t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

func (h *harness) calls(tool string) int { return countCalls(h.dir, tool) }

func resultText(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func metaString(r *mcp.CallToolResult, key string) string {
	s, _ := r.Meta[key].(string)
	return s
}

func TestExactRetryReplaysWithoutCallingUpstream(t *testing.T) {
	h := startHarness(t, harnessConfig{})
	args := map[string]any{"to": "ann@example.com", "body": "Your invoice is attached."}
	first := h.call("send", args)
	if first.IsError || resultText(first) != "sent to ann@example.com (call 1)" {
		t.Fatalf("first call: %+v %q", first, resultText(first))
	}
	retry := h.call("send", args)
	if got := h.calls("send"); got != 1 {
		t.Errorf("upstream saw %d sends, want 1", got)
	}
	if retry.IsError || resultText(retry) != resultText(first) {
		t.Errorf("retry answered %q, want the recorded %q", resultText(retry), resultText(first))
	}
	if retry.Meta["idem/replayed"] != true || metaString(retry, "idem/decision") != "duplicate" {
		t.Errorf("retry's _meta %v does not say it was replayed", retry.Meta)
	}
	// A different call is a new effect.
	other := h.call("send", map[string]any{"to": "bob@example.com", "body": "Your invoice is attached."})
	if other.IsError || h.calls("send") != 2 {
		t.Errorf("a call to another recipient was not run: %q, %d sends", resultText(other), h.calls("send"))
	}
}

func TestExplicitKeyReplaysAcrossArguments(t *testing.T) {
	h := startHarness(t, harnessConfig{})
	meta := mcp.Meta{"idempotencyKey": "order-77-mail"}
	first := h.callMeta("send", map[string]any{"to": "ann@example.com", "body": "Shipped."}, meta)
	again := h.callMeta("send", map[string]any{"to": "ann@example.com", "body": "Your order shipped."}, meta)
	if h.calls("send") != 1 {
		t.Errorf("upstream saw %d sends under one idempotency key, want 1", h.calls("send"))
	}
	key, err := ledger.KeyFor(ledger.KeyInput{IdempotencyKey: "order-77-mail", Tool: "send"})
	if err != nil {
		t.Fatal(err)
	}
	if resultText(again) != resultText(first) || metaString(again, "idem/key") != key {
		t.Errorf("second call under the key: %q %v", resultText(again), again.Meta)
	}
}

func TestReadReplayedUntilAWrite(t *testing.T) {
	h := startHarness(t, harnessConfig{})
	first := h.call("lookup", map[string]any{"id": "A-1"})
	second := h.call("lookup", map[string]any{"id": "A-1"})
	if h.calls("lookup") != 1 || resultText(second) != resultText(first) {
		t.Fatalf("a repeated read: upstream saw %d lookups, answers %q / %q", h.calls("lookup"), resultText(first), resultText(second))
	}
	h.call("send", map[string]any{"to": "ann@example.com", "body": "changed the record"})
	third := h.call("lookup", map[string]any{"id": "A-1"})
	if h.calls("lookup") != 2 || resultText(third) == resultText(first) {
		t.Errorf("a read after a write was replayed from before it: %d lookups, %q", h.calls("lookup"), resultText(third))
	}
}

func TestFailedCallRunsAgain(t *testing.T) {
	h := startHarness(t, harnessConfig{})
	args := map[string]any{"to": "ann@example.com", "body": "hello"}
	first := h.call("flaky", args)
	if !first.IsError || !strings.Contains(resultText(first), "temporarily unavailable") {
		t.Fatalf("first call: %q, want the upstream's error relayed", resultText(first))
	}
	retry := h.call("flaky", args)
	if retry.IsError || h.calls("flaky") != 2 {
		t.Errorf("retry after a failure: %q, upstream saw %d calls, want it run again", resultText(retry), h.calls("flaky"))
	}
}

func TestPermanentFailureUnderKeyReplayed(t *testing.T) {
	h := startHarness(t, harnessConfig{})
	meta := mcp.Meta{"idempotencyKey": "reject-9"}
	first := h.callMeta("reject", map[string]any{"id": "9"}, meta)
	again := h.callMeta("reject", map[string]any{"id": "9"}, meta)
	if !first.IsError || !again.IsError || resultText(again) != resultText(first) {
		t.Fatalf("answers %q / %q, want the error replayed", resultText(first), resultText(again))
	}
	if h.calls("reject") != 1 {
		t.Errorf("a permanent failure under a key ran %d times, want 1", h.calls("reject"))
	}
	key, err := ledger.KeyFor(ledger.KeyInput{IdempotencyKey: "reject-9", Tool: "reject"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := h.ledger.Get(context.Background(), config.DefaultTenant, key)
	if err != nil || rec.Record.Status != ledger.StatusFailed || rec.Record.Class != ledger.ClassPermanent {
		t.Errorf("record: %+v, %v; want FAILED permanent", rec.Record, err)
	}
}

func TestUpstreamCrashMidCallIsUncertainOnRetry(t *testing.T) {
	h := startHarness(t, harnessConfig{})
	args := map[string]any{"id": "pay-1"}
	first := h.call("crash", args)
	if !first.IsError || metaString(first, "idem/error") != "upstream_lost" {
		t.Fatalf("the crashed call answered %q %v, want a tool error saying the outcome is unknown", resultText(first), first.Meta)
	}
	retry := h.call("crash", args)
	if h.calls("crash") != 1 {
		t.Errorf("the retry ran the call again (%d calls): its first run may have taken effect", h.calls("crash"))
	}
	if !retry.IsError || metaString(retry, "idem/decision") != "uncertain" ||
		!strings.Contains(resultText(retry), "may or may not have taken effect") ||
		!strings.Contains(resultText(retry), mcpgate.ConfirmArgument) {
		t.Errorf("retry answered %q %v, want uncertain with how to proceed", resultText(retry), retry.Meta)
	}
	// The upstream is started again for the next call, with the client's
	// initialization replayed.
	next := h.call("send", map[string]any{"to": "ann@example.com", "body": "after the crash"})
	if next.IsError || h.calls("send") != 1 {
		t.Errorf("a call after the crash: %q, %d sends", resultText(next), h.calls("send"))
	}
}

func TestMalformedUpstreamReplyIsUncertain(t *testing.T) {
	h := startHarness(t, harnessConfig{})
	first := h.call("garbage", map[string]any{"id": "g-1"})
	if !first.IsError || metaString(first, "idem/error") != "upstream_lost" {
		t.Fatalf("the call answered %q %v, want a tool error saying the outcome is unknown", resultText(first), first.Meta)
	}
	retry := h.call("garbage", map[string]any{"id": "g-1"})
	if metaString(retry, "idem/decision") != "uncertain" || h.calls("garbage") != 1 {
		t.Errorf("retry: %q %v (%d calls), want uncertain without running it", resultText(retry), retry.Meta, h.calls("garbage"))
	}
	// The gateway stopped the broken upstream and starts a fresh one.
	if r := h.call("lookup", map[string]any{"id": "x"}); r.IsError {
		t.Errorf("after the malformed reply: %q", resultText(r))
	}
}

func TestUpstreamTimeout(t *testing.T) {
	gc := mcpgate.DefaultConfig()
	gc.CallTimeout = 300 * time.Millisecond // the tools below never answer before the test lets them
	h := startHarness(t, harnessConfig{gate: gc})

	// An upstream that honours the cancellation answers with an error:
	// the call did not complete, and a retry runs it again.
	first := h.call("hang", map[string]any{"id": "h-1"})
	if !first.IsError || metaString(first, "idem/error") != "upstream_timeout" {
		t.Fatalf("the call answered %q %v, want a timeout tool error", resultText(first), first.Meta)
	}
	waitFor(t, "the upstream to see the cancellation", func() bool { return h.calls("cancelled") == 1 })

	// An upstream that ignores it leaves the outcome unknown: a retry is
	// uncertain and does not run; its late answer is recorded and replayed.
	args := map[string]any{"id": "s-1"}
	stuck := h.call("stuck", args)
	if metaString(stuck, "idem/error") != "upstream_timeout" {
		t.Fatalf("the stuck call answered %q %v, want a timeout tool error", resultText(stuck), stuck.Meta)
	}
	retry := h.call("stuck", args)
	if metaString(retry, "idem/decision") != "uncertain" || h.calls("stuck") != 1 {
		t.Errorf("retry while the upstream is stuck: %q %v (%d calls), want uncertain without running it", resultText(retry), retry.Meta, h.calls("stuck"))
	}
	if err := os.WriteFile(filepath.Join(h.dir, "release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the late answer to be recorded", func() bool {
		r := h.call("stuck", args)
		return !r.IsError && resultText(r) == "finished late: s-1" && r.Meta["idem/replayed"] == true
	})
	if h.calls("stuck") != 1 {
		t.Errorf("the upstream ran the stuck call %d times, want 1", h.calls("stuck"))
	}
}

func TestPassThrough(t *testing.T) {
	h := startHarness(t, harnessConfig{sampling: "teal"})
	ctx := context.Background()
	tools, err := h.cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 10 {
		t.Fatalf("tools/list: %v, %d tools", err, len(tools.Tools))
	}
	res, err := h.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://greeting"})
	if err != nil || res.Contents[0].Text != "hello from upstream" {
		t.Errorf("resources/read: %v %+v", err, res)
	}
	p, err := h.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"})
	if err != nil || p.Messages[0].Content.(*mcp.TextContent).Text != "say hello" {
		t.Errorf("prompts/get: %v %+v", err, p)
	}
	// Progress notifications reach the client; the server's request for
	// sampling reaches it and its answer goes back.
	params := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"id": "p"}}
	params.SetProgressToken("tok-1")
	if r, err := h.cs.CallTool(ctx, params); err != nil || resultText(r) != "done p" {
		t.Fatalf("progress tool: %v %v", err, r)
	}
	waitFor(t, "two progress notifications", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.progress) == 2
	})
	if r := h.call("ask", map[string]any{"id": "q"}); resultText(r) != "the model said: teal" {
		t.Errorf("sampling through the gateway: %q", resultText(r))
	}
}

func TestCancellationReachesUpstream(t *testing.T) {
	h := startHarness(t, harnessConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.cs.CallTool(ctx, &mcp.CallToolParams{Name: "hang", Arguments: map[string]any{"id": "c"}})
		done <- err
	}()
	waitFor(t, "the upstream to start the call", func() bool { return h.calls("hang") == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Error("a cancelled call returned no error")
	}
	waitFor(t, "the upstream to see the cancellation", func() bool { return h.calls("cancelled") == 1 })
}

func TestToolListPassedThroughAndRead(t *testing.T) {
	h := startHarness(t, harnessConfig{})
	ctx := context.Background()
	through, err := h.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The same list straight from the upstream.
	conn, err := upstreamDial(t.TempDir())(ctx)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil).Connect(ctx, connTransport{conn}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	want, err := direct.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	gotJSON, _ := json.Marshal(through)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) || len(want.Tools) != 10 {
		t.Errorf("tools/list through the gateway:\n%s\nstraight from the upstream:\n%s", gotJSON, wantJSON)
	}
	// The annotations became policies: after the session's first call
	// (which waits for the gateway's own listing) a check of the read-only
	// tool answers with the read-only policy, of a write with the default.
	h.call("send", map[string]any{"to": "ann@example.com", "body": "hi"})
	for tool, want := range map[string]string{"lookup": "read-only", "send": "default"} {
		res, err := h.local.Check(ctx, clientCheck(tool, `{"id":"z","to":"z@example.com","body":"b"}`))
		if err != nil || res.Policy != want {
			t.Errorf("check of %s: %v, policy %q, want %q", tool, err, res.Policy, want)
		}
	}
}

// connTransport hands out one connection.
type connTransport struct{ c mcp.Connection }

func (t connTransport) Connect(context.Context) (mcp.Connection, error) { return t.c, nil }

// testLog sends log lines to the test's log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func clientCheck(tool, args string) client.CheckRequest {
	return client.CheckRequest{SessionID: "probe", WorkflowID: "probe", StepID: tool, Tool: tool, Arguments: json.RawMessage(args)}
}

// fakeClock is a clock the test moves: After's channels fire when Advance
// passes their time.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, fakeWaiter{c.now.Add(d), ch})
	return ch
}

// Advance moves the clock by d and fires what is due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// TestLongCallKeepsItsLease: while the upstream runs a call for longer
// than its lease, the gateway renews it, so the key stays held (a twin
// would wait, not be answered uncertain) and the late result is recorded
// as the call's.
func TestLongCallKeepsItsLease(t *testing.T) {
	clk := newFakeClock()
	gc := mcpgate.DefaultConfig()
	gc.Session = "long-call"
	h := startHarness(t, harnessConfig{gate: gc, clock: clk})
	lease := ledger.DefaultConfig().Lease
	ctx := context.Background()

	answer := make(chan *mcp.CallToolResult, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		res, err := h.cs.CallTool(cctx, &mcp.CallToolParams{Name: "hang", Arguments: map[string]any{"id": "long-1"}})
		if err != nil {
			t.Errorf("tools/call hang: %v", err)
		}
		answer <- res
	}()
	waitFor(t, "the upstream to start the call", func() bool { return h.calls("hang") == 1 })
	record := func() ledger.Record {
		recs, err := h.ledger.Session(ctx, config.DefaultTenant, "long-call", 0, 10)
		if err != nil || len(recs) != 1 {
			t.Fatalf("the session's records: %d, %v", len(recs), err)
		}
		return recs[0]
	}
	claimed := record()
	// Past the lease the check granted, twice over, a third of it at a
	// time: each step is due a renewal.
	for range 6 {
		waitFor(t, "the gateway to wait for its next renewal", func() bool { return clk.pending() > 0 })
		clk.Advance(lease / 3)
		want := clk.Now().Add(lease).UnixMilli()
		waitFor(t, "the lease to be renewed", func() bool { return record().LeaseUntil == want })
	}
	r := record()
	if r.Status != ledger.StatusPending || r.LeaseUntil <= clk.Now().UnixMilli() || clk.Now().UnixMilli() <= claimed.LeaseUntil {
		t.Fatalf("at %v after the claim: %s, lease until %v (claimed until %v); want PENDING with a lease that has not ended",
			clk.Now().Sub(time.UnixMilli(claimed.CreatedAt)), r.Status, time.UnixMilli(r.LeaseUntil), time.UnixMilli(claimed.LeaseUntil))
	}
	if err := os.WriteFile(filepath.Join(h.dir, "release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if res := <-answer; res == nil || res.IsError || resultText(res) != "finished late: long-1" {
		t.Fatalf("the long call answered %+v", res)
	}
	waitFor(t, "the result to be recorded", func() bool { return record().Status == ledger.StatusSuccess })
}
