package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/client"
	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/server"
)

func emailArgs(to, body string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"to":%q,"subject":"Your invoice","body":%q}`, to, body))
}

// TestEndpoints walks every endpoint through the client: check, complete,
// the replay, fail (transient and permanent), records, workflows,
// forget, health, readiness, metrics and the document.
func TestEndpoints(t *testing.T) {
	e := start(t, options{})
	c := e.client("")
	ctx := context.Background()

	req := client.CheckRequest{SessionID: "s1", WorkflowID: "wf", StepID: "1", Tool: "send_email",
		Arguments: emailArgs("ann@example.com", "Hello Ann, here is your invoice for March.")}
	res, err := c.Check(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision != client.Execute || res.Token == "" || res.Key != "wf:1:send_email" || res.LeaseUntil.IsZero() {
		t.Fatalf("first check: %+v", res)
	}
	if res.TimingsUS["total"] <= 0 {
		t.Errorf("timings_us has no total: %v", res.TimingsUS)
	}

	// The record while it runs: PENDING, in progress, no token.
	status, _, body := e.raw("GET", "/v1/records/"+url.PathEscape(res.Key), "", "", nil)
	if status != 200 || strings.Contains(string(body), res.Token) || !strings.Contains(string(body), `"next_check":"in_progress"`) {
		t.Fatalf("GET record while pending: %d %s", status, body)
	}

	rec, err := c.Complete(ctx, res.Key, res.Token, json.RawMessage(`{"message_id":"m-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != "SUCCESS" || string(rec.Result) != `{"message_id":"m-1"}` {
		t.Fatalf("complete: %+v", rec)
	}

	// The same key again: the result is replayed, with the header.
	again, err := c.Check(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if again.Decision != client.Duplicate || again.Stage != "key" || !again.Replayed ||
		string(again.Match.Result) != `{"message_id":"m-1"}` || again.Token != "" {
		t.Fatalf("second check: %+v", again)
	}

	// Completing twice: 409.
	if _, err := c.Complete(ctx, res.Key, res.Token, json.RawMessage(`1`)); apiStatus(err) != http.StatusConflict {
		t.Errorf("second complete: %v, want 409", err)
	}

	// A transient failure lets the key run again; a permanent one is replayed.
	t2 := client.CheckRequest{SessionID: "s1", WorkflowID: "wf", StepID: "2", Tool: "charge", Arguments: json.RawMessage(`{"amount":10,"card":"c1"}`)}
	r2, err := c.Check(ctx, t2)
	if err != nil || r2.Decision != client.Execute {
		t.Fatalf("charge: %+v %v", r2, err)
	}
	if rec, err := c.Fail(ctx, r2.Key, r2.Token, json.RawMessage(`{"error":"timeout"}`), true); err != nil || rec.ErrorClass != "transient" || rec.NextCheck != "execute" {
		t.Fatalf("fail transient: %+v %v", rec, err)
	}
	t2.Attempt = &client.Attempt{Kind: "transient", Number: 2}
	r3, err := c.Check(ctx, t2)
	if err != nil || r3.Decision != client.Execute {
		t.Fatalf("after a transient failure: %+v %v", r3, err)
	}
	if _, err := c.Fail(ctx, r3.Key, r3.Token, json.RawMessage(`{"error":"card declined"}`), false); err != nil {
		t.Fatal(err)
	}
	r4, err := c.Check(ctx, t2)
	if err != nil || r4.Decision != client.Duplicate || !r4.Replayed || r4.Match.Status != "FAILED" || string(r4.Match.Error) != `{"error":"card declined"}` {
		t.Fatalf("after a permanent failure: %+v %v", r4, err)
	}

	// The workflow lists both steps with their states.
	wf, err := c.Workflow(ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, s := range wf.Steps {
		states[s.StepID] = s.Status + "/" + s.NextCheck
	}
	if states["1"] != "SUCCESS/replay_result" || states["2"] != "FAILED/replay_error" || len(wf.Steps) != 2 {
		t.Errorf("workflow: %v", states)
	}

	// Forget the charge: 204, then 404, and the key executes again.
	if err := c.Forget(ctx, r2.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Record(ctx, r2.Key); apiStatus(err) != http.StatusNotFound {
		t.Errorf("record after forget: %v, want 404", err)
	}
	if err := c.Forget(ctx, r2.Key); apiStatus(err) != http.StatusNotFound {
		t.Errorf("forget twice: %v, want 404", err)
	}
	if r5, err := c.Check(ctx, t2); err != nil || r5.Decision != client.Execute {
		t.Errorf("after forget: %+v %v", r5, err)
	}

	// A key with '/', '#' and spaces survives path escaping.
	odd := client.CheckRequest{SessionID: "s2", IdempotencyKey: "order/42#a b", Tool: "ship", Arguments: json.RawMessage(`{"order":"42"}`)}
	r, err := c.Check(ctx, odd)
	if err != nil || r.Decision != client.Execute || r.Key != "#4:ship:12:order/42#a b" {
		t.Fatalf("odd key: %+v %v", r, err)
	}
	if got, err := c.Record(ctx, r.Key); err != nil || got.Key != r.Key {
		t.Errorf("odd key record: %+v %v", got, err)
	}

	for _, path := range []string{"/healthz", "/readyz", "/openapi.json"} {
		if status, h, body := e.raw("GET", path, "", "", nil); status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || len(body) == 0 {
			t.Errorf("GET %s: %d %s", path, status, body)
		}
	}
	status, _, body = e.raw("GET", "/metrics", "", "", nil)
	for _, want := range []string{
		`idem_checks_total{decision="duplicate",stage="key",tenant="default",tool="send_email"} 1`,
		`idem_checks_total{decision="execute",stage="new",tenant="default",tool="other"}`,
		`idem_ledger_transitions_total{state="success",tenant="default"} 1`,
		`idem_ledger_transitions_total{state="failed_permanent",tenant="default"} 1`,
		`idem_ledger_transitions_total{state="forgotten",tenant="default"} 1`,
		`idem_stage_duration_seconds_bucket{stage="canon"`,
		`idem_embed_cache_misses_total`,
		`idem_http_requests_total{code="200",route="/v1/check"}`,
		"go_memstats_heap_inuse_bytes", "go_goroutines", "process_resident_memory_bytes",
		"\nidem_session_views ", "\nidem_session_views_dropped_total 0\n",
		`idem_encoder_queued_texts{queue="check"} `, `idem_encoder_queued_texts{queue="background"} `, "\nidem_encoder_batches_running ",
	} {
		if status != 200 || !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if !regexp.MustCompile(`\nidem_session_view_bytes [1-9]`).Match(body) {
		t.Errorf("metrics: the session views' bytes are not reported above 0")
	}
	if strings.Contains(string(body), "wf:1") || strings.Contains(string(body), "s1") {
		t.Errorf("metrics carry a key or session")
	}
}

func apiStatus(err error) int {
	if ae, ok := errors.AsType[*client.APIError](err); ok {
		return ae.Status
	}
	return 0
}

// failingFunnel is a Checker whose ledger is broken: our fault, a 500.
// checkerFunc is a server.Checker from a function.
type checkerFunc func(ctx context.Context, req funnel.Request) (funnel.Result, error)

func (f checkerFunc) Check(ctx context.Context, req funnel.Request) (funnel.Result, error) {
	return f(ctx, req)
}

type failingFunnel struct{}

func (failingFunnel) Check(context.Context, funnel.Request) (funnel.Result, error) {
	return funnel.Result{}, errors.New("badger: value log corrupt at /secret/path")
}

// unavailableFunnel is a Checker whose store is unreachable: a 503.
type unavailableFunnel struct{}

func (unavailableFunnel) Check(context.Context, funnel.Request) (funnel.Result, error) {
	return funnel.Result{}, fmt.Errorf("claim: %w", ledger.ErrUnavailable)
}

// TestErrorStatuses: every error status the API documents, with a detail
// naming the field.
func TestErrorStatuses(t *testing.T) {
	strict := funnel.DefaultPolicy()
	strict.Strict = true
	e := start(t, options{policies: []funnel.Policy{strict}, maxBody: 64 << 10})
	authed := start(t, options{keys: map[string]string{"k-acme": "acme"}})
	broken := start(t, options{funnel: failingFunnel{}})
	unavailable := start(t, options{funnel: unavailableFunnel{}})
	c := e.client("")
	ctx := context.Background()
	exec, err := c.Check(ctx, client.CheckRequest{SessionID: "s", IdempotencyKey: "pay-1", Tool: "charge", Arguments: json.RawMessage(`{"amount":5}`)})
	if err != nil || exec.Decision != client.Execute {
		t.Fatalf("%+v %v", exec, err)
	}
	okCheck := `{"session_id":"s","idempotency_key":"k1","tool":"t","arguments":{"a":1}}`
	done, err := c.Check(ctx, client.CheckRequest{SessionID: "s", IdempotencyKey: "pay-2", Tool: "charge", Arguments: json.RawMessage(`{"amount":7}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Complete(ctx, done.Key, done.Token, json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name         string
		env          *env
		method, path string
		ctype, key   string
		body         string
		status       int
		field        string
		detail       string
		typ          string
	}{
		{"400 missing session", e, "POST", "/v1/check", "application/json", "", `{"idempotency_key":"k","tool":"t","arguments":{}}`, 400, "session_id", "session_id: missing", server.ProblemInvalidField},
		{"400 missing position", e, "POST", "/v1/check", "application/json", "", `{"session_id":"s","tool":"t","arguments":{"a":1}}`, 400, "workflow_id", "workflow_id", server.ProblemInvalidField},
		{"400 bad argument path", e, "POST", "/v1/check", "application/json", "", `{"session_id":"s","idempotency_key":"k","tool":"t","arguments":{"a":{"b":[1,{"c":1,"c":2}]}}}`, 400, "arguments.a.b[1]", "duplicate key", server.ProblemInvalidField},
		{"400 missing result", e, "POST", "/v1/complete", "application/json", "", `{"key":"pay-1","token":"x"}`, 400, "result", "result: missing", server.ProblemInvalidField},
		{"400 bad attempt kind", e, "POST", "/v1/check", "application/json", "", `{"session_id":"s","idempotency_key":"k","tool":"t","arguments":{"a":1},"attempt":{"kind":"again"}}`, 400, "attempt.kind", "attempt.kind", server.ProblemInvalidField},
		{"401 no credentials", authed, "POST", "/v1/check", "application/json", "", okCheck, 401, "Authorization", "Authorization", server.ProblemUnauthorized},
		{"401 bad credentials", authed, "POST", "/v1/check", "application/json", "k-wrong", okCheck, 401, "Authorization", "unknown API key", server.ProblemUnauthorized},
		{"401 on records too", authed, "GET", "/v1/records/k1", "", "", "", 401, "Authorization", "", server.ProblemUnauthorized},
		{"404 unknown key", e, "GET", "/v1/records/nope", "", "", "", 404, "key", "no record", server.ProblemNotFound},
		{"404 complete unknown key", e, "POST", "/v1/complete", "application/json", "", `{"key":"nope","token":"x","result":1}`, 404, "key", "no record", server.ProblemNotFound},
		{"404 unknown endpoint", e, "GET", "/v2/check", "", "", "", 404, "", "no such endpoint", server.ProblemNotFound},
		{"409 stale token", e, "POST", "/v1/complete", "application/json", "", `{"key":"` + exec.Key + `","token":"not-the-token","result":1}`, 409, "token", "lease token", server.ProblemStaleToken},
		{"413 body too large", e, "POST", "/v1/check", "application/json", "", `{"session_id":"` + strings.Repeat("x", 70<<10) + `"}`, 413, "body", "larger than", server.ProblemTooLarge},
		{"413 key too long", e, "GET", "/v1/records/" + strings.Repeat("k", 2000), "", "", "", 413, "key", "too large", server.ProblemTooLarge},
		{"415 wrong content type", e, "POST", "/v1/check", "text/plain", "", okCheck, 415, "Content-Type", "application/json", server.ProblemMediaType},
		{"415 no content type", e, "POST", "/v1/check", "", "", okCheck, 415, "Content-Type", "", server.ProblemMediaType},
		{"422 key reused with other arguments", e, "POST", "/v1/check", "application/json", "", `{"session_id":"s","idempotency_key":"pay-1","tool":"charge","arguments":{"amount":6}}`, 422, "idempotency_key", "reused", server.ProblemMismatch},
		{"409 forget a call in progress", e, "DELETE", "/v1/records/" + url.PathEscape(exec.Key), "", "", "", 409, "key", "live lease", server.ProblemInProgress},
		{"409 renew a finished record", e, "POST", "/v1/renew", "application/json", "", `{"key":"` + done.Key + `","token":"` + done.Token + `"}`, 409, "key", "already completed", server.ProblemNotPending},
		{"400 negative lease_ms", e, "POST", "/v1/renew", "application/json", "", `{"key":"` + exec.Key + `","token":"` + exec.Token + `","lease_ms":-1}`, 400, "lease_ms", "negative", server.ProblemInvalidField},
		{"400 bad force", e, "DELETE", "/v1/records/" + url.PathEscape(exec.Key) + "?force=yes", "", "", "", 400, "force", "not true or false", server.ProblemInvalidField},
		{"503 store unavailable", unavailable, "POST", "/v1/check", "application/json", "", okCheck, 503, "", "try again", server.ProblemUnavailable},
		{"500 our fault, no detail", broken, "POST", "/v1/check", "application/json", "", okCheck, 500, "", "internal error", server.ProblemInternal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := tc.env.raw(tc.method, tc.path, tc.ctype, tc.key, []byte(tc.body))
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			if ct := h.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type %q", ct)
			}
			p := problem(t, body)
			if p.Status != tc.status || p.Field != tc.field || !strings.Contains(p.Detail, tc.detail) || p.Type != tc.typ {
				t.Errorf("problem %+v, want type %s, field %q and detail containing %q", p, tc.typ, tc.field, tc.detail)
			}
			if strings.Contains(p.Detail, "secret") || strings.Contains(p.Detail, "badger") {
				t.Errorf("detail leaks our fault: %q", p.Detail)
			}
			if tc.status == 401 && h.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
}

// TestNoAuthOnlyOnLoopback: without keys the server refuses to listen
// beyond loopback; with keys it may.
func TestNoAuthOnlyOnLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0"} {
		cfg := server.DefaultConfig()
		cfg.Addr = addr
		_, err := server.New(cfg, server.Deps{Funnel: failingFunnel{}, Ledger: nil})
		if !errors.Is(err, server.ErrNoAuthPublic) {
			t.Errorf("%s without keys: %v, want ErrNoAuthPublic", addr, err)
		}
	}
	cfg := server.DefaultConfig()
	cfg.Addr = "0.0.0.0:0"
	cfg.Keys = map[[32]byte]string{{1}: "acme"}
	if err := cfg.Validate(); err != nil {
		t.Errorf("with keys: %v", err)
	}
}

// TestTenants: two tenants with the same keys, sessions and calls never
// see each other's records or semantic memory.
func TestTenants(t *testing.T) {
	e := start(t, options{keys: map[string]string{"key-a": "acme", "key-b": "beta"}})
	a, b := e.client("key-a"), e.client("key-b")
	ctx := context.Background()
	req := client.CheckRequest{SessionID: "s1", WorkflowID: "wf", StepID: "1", Tool: "send_email",
		Arguments: emailArgs("ann@example.com", "Hello Ann, here is your invoice for March.")}
	ra, err := a.Check(ctx, req)
	if err != nil || ra.Decision != client.Execute {
		t.Fatalf("acme: %+v %v", ra, err)
	}
	if _, err := a.Complete(ctx, ra.Key, ra.Token, json.RawMessage(`"sent by acme"`)); err != nil {
		t.Fatal(err)
	}
	// Same key in beta: executes, as if acme did not exist.
	rb, err := b.Check(ctx, req)
	if err != nil || rb.Decision != client.Execute {
		t.Fatalf("beta, same key: %+v %v", rb, err)
	}
	// beta's token does not complete acme's record, nor the reverse.
	if _, err := a.Complete(ctx, rb.Key, rb.Token, json.RawMessage(`1`)); apiStatus(err) != http.StatusConflict {
		t.Errorf("acme completing with beta's token: %v, want 409 (acme's record is SUCCESS)", err)
	}
	// A reworded call in the same session id: acme's memory flags it,
	// beta's (which holds only its own pending call) flags it against
	// beta's record, never acme's.
	near := client.CheckRequest{SessionID: "s1", WorkflowID: "wf", StepID: "2", Tool: "send_email",
		Arguments: emailArgs("ann@example.com", "Hi Ann, here is your March invoice.")}
	na, err := a.Check(ctx, near)
	if err != nil || na.Decision != client.Confirm || na.Match.Key != "wf:1:send_email" || na.Match.Status != "SUCCESS" {
		t.Fatalf("acme near-duplicate: %+v %v", na, err)
	}
	other := client.CheckRequest{SessionID: "s9", WorkflowID: "wf", StepID: "2", Tool: "send_email",
		Arguments: emailArgs("ann@example.com", "Hi Ann, here is your March invoice.")}
	if nb, err := b.Check(ctx, other); err != nil || nb.Decision != client.Execute {
		t.Fatalf("beta, another session: %+v %v", nb, err)
	}
	// Records: each tenant sees its own.
	if got, err := b.Record(ctx, "wf:1:send_email"); err != nil || got.Status != "PENDING" {
		t.Errorf("beta's record: %+v %v", got, err)
	}
	if got, err := a.Record(ctx, "wf:1:send_email"); err != nil || string(got.Result) != `"sent by acme"` {
		t.Errorf("acme's record: %+v %v", got, err)
	}
	wa, _ := a.Workflow(ctx, "wf")
	wb, _ := b.Workflow(ctx, "wf")
	for _, s := range wb.Steps {
		if string(s.Result) == `"sent by acme"` {
			t.Error("beta's workflow shows acme's result")
		}
	}
	if len(wa.Steps) != 1 || len(wb.Steps) != 2 {
		t.Errorf("workflows: acme %d steps, beta %d; want 1 and 2", len(wa.Steps), len(wb.Steps))
	}
	// Forgetting in beta leaves acme's record alone.
	if err := b.ForceForget(ctx, "wf:1:send_email"); err != nil { // beta's call is still running
		t.Fatal(err)
	}
	if _, err := a.Record(ctx, "wf:1:send_email"); err != nil {
		t.Errorf("acme's record after beta forgot its own: %v", err)
	}
	status, _, body := e.raw("GET", "/metrics", "", "", nil)
	if status != 200 || !strings.Contains(string(body), `tenant="acme"`) || !strings.Contains(string(body), `tenant="beta"`) {
		t.Errorf("metrics are not by tenant")
	}
}

// TestRace: 200 concurrent clients on 20 keys. Exactly 20 execute; every
// other first answer is in_progress or duplicate; after completion every
// waiter gets the result. Then the same through Guard: fn runs 20 times.
func TestRace(t *testing.T) {
	e := start(t, options{})
	const clients, keys = 200, 20
	c := e.client("")
	ctx := context.Background()
	req := func(i int) client.CheckRequest {
		return client.CheckRequest{SessionID: fmt.Sprintf("s%d", i%keys), WorkflowID: "race", StepID: fmt.Sprint(i % keys),
			Tool: "charge", Arguments: json.RawMessage(fmt.Sprintf(`{"amount":%d,"card":"c-%d"}`, 100+i%keys, i%keys))}
	}
	guardReq := func(i int) client.CheckRequest {
		r := req(i)
		r.WorkflowID, r.SessionID = "guard", "g"+r.SessionID
		return r
	}
	var (
		executes  atomic.Int64
		mu        sync.Mutex
		decisions = map[string]int{}
		wg        sync.WaitGroup
		gate      = make(chan struct{})
		errs      = make(chan error, clients)
	)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			r, err := c.Check(ctx, req(i))
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			decisions[r.Decision]++
			mu.Unlock()
			switch r.Decision {
			case client.Execute:
				executes.Add(1)
				time.Sleep(50 * time.Millisecond) // the effect
				if _, err := c.Complete(ctx, r.Key, r.Token, mustJSON(t, map[string]string{"charged": r.Key})); err != nil {
					errs <- err
				}
				return
			case client.InProgress, client.Duplicate:
			default:
				errs <- fmt.Errorf("client %d: decision %s: %s", i, r.Decision, r.Reason)
				return
			}
			// A waiter: wait for the winner and get its result.
			w := req(i)
			w.WaitMS = 20_000
			got, err := c.Check(ctx, w)
			if err != nil {
				errs <- err
				return
			}
			want := fmt.Sprintf(`{"charged":"race:%d:charge"}`, i%keys)
			if got.Decision != client.Duplicate || got.Match == nil || string(got.Match.Result) != want {
				errs <- fmt.Errorf("waiter %d: %s %+v, want the result %s", i, got.Decision, got.Match, want)
			}
		}()
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if executes.Load() != keys {
		t.Errorf("%d executes, want exactly %d (decisions %v)", executes.Load(), keys, decisions)
	}
	t.Logf("first answers: %v", decisions)

	// Guard: 200 concurrent calls on 20 new keys run fn 20 times, and
	// every caller gets its key's result.
	var runs atomic.Int64
	errs = make(chan error, clients)
	gate = make(chan struct{})
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			r := guardReq(i)
			out, err := c.Guard(ctx, r, func(ctx context.Context, key string) (json.RawMessage, error) {
				runs.Add(1)
				time.Sleep(50 * time.Millisecond)
				return mustJSON(t, map[string]string{"charged": key}), nil
			})
			want := fmt.Sprintf(`{"charged":"guard:%d:charge"}`, i%keys)
			if err != nil || string(out) != want {
				errs <- fmt.Errorf("guard %d: %s %v, want %s", i, out, err, want)
			}
		}()
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if runs.Load() != keys {
		t.Errorf("fn ran %d times, want %d", runs.Load(), keys)
	}
}

// TestRestart: a restarted server keeps every record and a session's
// semantic memory.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	e := start(t, options{dir: dir})
	c := e.client("")
	ctx := context.Background()
	first := client.CheckRequest{SessionID: "s1", WorkflowID: "wf", StepID: "1", Tool: "send_email",
		Arguments: emailArgs("ann@example.com", "Hello Ann, here is your invoice for March.")}
	out, err := c.Guard(ctx, first, func(context.Context, string) (json.RawMessage, error) { return json.RawMessage(`{"id":"m-1"}`), nil })
	if err != nil {
		t.Fatal(err)
	}
	pending, err := c.Check(ctx, client.CheckRequest{SessionID: "s2", IdempotencyKey: "k-pending", Tool: "charge", Arguments: json.RawMessage(`{"amount":1}`)})
	if err != nil || pending.Decision != client.Execute {
		t.Fatal(pending, err)
	}
	e.stop()

	e2 := start(t, options{dir: dir})
	c2 := e2.client("")
	got, err := c2.Check(ctx, first)
	if err != nil || got.Decision != client.Duplicate || string(got.Match.Result) != string(out) {
		t.Fatalf("after restart, same key: %+v %v", got, err)
	}
	if rec, err := c2.Record(ctx, pending.Key); err != nil || rec.Status != "PENDING" {
		t.Errorf("pending record after restart: %+v %v", rec, err)
	}
	// The lease token survives: the holder can still complete.
	if _, err := c2.Complete(ctx, pending.Key, pending.Token, json.RawMessage(`"ok"`)); err != nil {
		t.Errorf("completing after restart: %v", err)
	}
	// Semantic memory: a reworded call at a new step is caught.
	near := client.CheckRequest{SessionID: "s1", WorkflowID: "wf", StepID: "7", Tool: "send_email",
		Arguments: emailArgs("ann@example.com", "Hi Ann, here is your March invoice.")}
	nr, err := c2.Check(ctx, near)
	if err != nil || nr.Decision != client.Confirm || nr.Stage != "semantic" || nr.Match.Key != "wf:1:send_email" {
		t.Fatalf("after restart, reworded call: %+v %v", nr, err)
	}
}

// TestGuard: duplicate without running fn, permanent failures replayed,
// confirm as a typed error the model can read.
func TestGuard(t *testing.T) {
	e := start(t, options{})
	c := e.client("")
	ctx := context.Background()
	var runs atomic.Int64
	send := func(context.Context, string) (json.RawMessage, error) {
		runs.Add(1)
		return json.RawMessage(`{"sent":true}`), nil
	}
	req := client.CheckRequest{SessionID: "s", WorkflowID: "wf", StepID: "1", Tool: "send_email",
		Arguments: emailArgs("ann@example.com", "Hello Ann, here is your invoice for March.")}
	if _, err := c.Guard(ctx, req, send); err != nil {
		t.Fatal(err)
	}
	out, err := c.Guard(ctx, req, send)
	if err != nil || string(out) != `{"sent":true}` || runs.Load() != 1 {
		t.Fatalf("retry: %s %v, fn ran %d times", out, err, runs.Load())
	}
	near := req
	near.StepID = "2"
	near.Arguments = emailArgs("ann@example.com", "Hi Ann, here is your March invoice.")
	_, err = c.Guard(ctx, near, send)
	var fe *client.FlaggedError
	if !errors.Is(err, client.ErrConfirm) || !errors.As(err, &fe) || runs.Load() != 1 || !strings.Contains(err.Error(), "wf:1:send_email") {
		t.Fatalf("reworded call: %v (fn ran %d times)", err, runs.Load())
	}
	t.Logf("what the model reads: %v", err)

	// A permanent failure (an HTTP 422 from the tool) is recorded and replayed.
	charge := client.CheckRequest{SessionID: "s", WorkflowID: "wf", StepID: "3", Tool: "charge", Arguments: json.RawMessage(`{"amount":10}`)}
	declined := &client.APIError{Status: 422, Detail: "card declined"}
	if _, err := c.Guard(ctx, charge, func(context.Context, string) (json.RawMessage, error) { return nil, declined }); !errors.Is(err, declined) {
		t.Fatalf("fn's error: %v", err)
	}
	_, err = c.Guard(ctx, charge, func(context.Context, string) (json.RawMessage, error) {
		t.Error("fn ran after a permanent failure")
		return nil, nil
	})
	if !errors.Is(err, client.ErrFailedBefore) || !strings.Contains(err.Error(), "card declined") {
		t.Errorf("after a permanent failure: %v", err)
	}
	// A transient one (a timeout) lets the next Guard run fn again.
	ship := client.CheckRequest{SessionID: "s", WorkflowID: "wf", StepID: "4", Tool: "ship", Arguments: json.RawMessage(`{"order":"9"}`)}
	if _, err := c.Guard(ctx, ship, func(context.Context, string) (json.RawMessage, error) { return nil, context.DeadlineExceeded }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	ship.Attempt = &client.Attempt{Kind: "transient", Number: 2}
	if out, err := c.Guard(ctx, ship, func(context.Context, string) (json.RawMessage, error) { return json.RawMessage(`"shipped"`), nil }); err != nil || string(out) != `"shipped"` {
		t.Errorf("after a transient failure: %s %v", out, err)
	}
	// client.Permanent overrides the classification.
	p := client.CheckRequest{SessionID: "s", WorkflowID: "wf", StepID: "5", Tool: "ship", Arguments: json.RawMessage(`{"order":"10"}`)}
	c.Guard(ctx, p, func(context.Context, string) (json.RawMessage, error) {
		return nil, client.Permanent(errors.New("no such order"))
	})
	if rec, err := c.Record(ctx, "wf:5:ship"); err != nil || rec.ErrorClass != "permanent" {
		t.Errorf("client.Permanent: %+v %v", rec, err)
	}
}

// TestUncertainAndTakeover: an expired lease is uncertain; a takeover
// claims it with a new token and the old token goes stale.
func TestUncertainAndTakeover(t *testing.T) {
	e := start(t, options{lease: time.Second})
	c := e.client("")
	ctx := context.Background()
	req := client.CheckRequest{SessionID: "s", IdempotencyKey: "k-slow", Tool: "charge", Arguments: json.RawMessage(`{"amount":3}`)}
	first, err := c.Check(ctx, req)
	if err != nil || first.Decision != client.Execute {
		t.Fatal(first, err)
	}
	time.Sleep(1100 * time.Millisecond)
	_, err = c.Guard(ctx, req, func(context.Context, string) (json.RawMessage, error) { t.Error("fn ran"); return nil, nil })
	if !errors.Is(err, client.ErrUncertain) {
		t.Fatalf("expired lease: %v", err)
	}
	req.Takeover = true
	tk, err := c.Check(ctx, req)
	if err != nil || tk.Decision != client.Execute || tk.Token == first.Token {
		t.Fatalf("takeover: %+v %v", tk, err)
	}
	if _, err := c.Complete(ctx, first.Key, first.Token, json.RawMessage(`1`)); apiStatus(err) != http.StatusConflict {
		t.Errorf("old token after takeover: %v, want 409", err)
	}
	_, _, body := e.raw("GET", "/metrics", "", "", nil)
	if !strings.Contains(string(body), `idem_lease_takeovers_total{tenant="default"} 1`) {
		t.Error("takeover not counted")
	}
}

// TestShutdownDrains: a check waiting for its twin when shutdown begins
// still gets its answer; new connections are refused afterwards.
func TestShutdownDrains(t *testing.T) {
	waiting := make(chan struct{}, 1) // a check with wait_ms reached the funnel
	e := start(t, options{wrap: func(f server.Checker) server.Checker {
		return checkerFunc(func(ctx context.Context, req funnel.Request) (funnel.Result, error) {
			if req.Wait > 0 {
				waiting <- struct{}{}
			}
			return f.Check(ctx, req)
		})
	}})
	c := e.client("")
	ctx := context.Background()
	req := client.CheckRequest{SessionID: "s", IdempotencyKey: "k-drain", Tool: "charge", Arguments: json.RawMessage(`{"amount":1}`)}
	first, err := c.Check(ctx, req)
	if err != nil || first.Decision != client.Execute {
		t.Fatal(first, err)
	}
	waiter := make(chan *client.Result, 1)
	go func() {
		w := req
		w.WaitMS = 10_000
		r, err := c.Check(ctx, w)
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		waiter <- r
	}()
	// The waiter's request is being served (not on an idle connection that
	// Shutdown would close), however slow the machine.
	<-waiting
	stopped := make(chan struct{})
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		e.srv.Shutdown(sctx)
		close(stopped)
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := e.ledger.Complete(ctx, "default", first.Key, first.Token, json.RawMessage(`"charged"`)); err != nil {
		t.Fatal(err)
	}
	r := <-waiter
	if r == nil || r.Decision != client.Duplicate || string(r.Match.Result) != `"charged"` {
		t.Fatalf("waiter during shutdown: %+v", r)
	}
	<-stopped
	if _, err := http.Get(e.url + "/healthz"); err == nil {
		t.Error("the server still accepts connections after shutdown")
	}
}

// TestReferenceTime: relative dates are read against the agent's own date
// from reference_time, in its offset, and the answer says which day.
func TestReferenceTime(t *testing.T) {
	e := start(t, options{})
	c := e.client("")
	ctx := context.Background()
	book := func(step, date, ref string) *client.Result {
		t.Helper()
		res, err := c.Check(ctx, client.CheckRequest{SessionID: "s", WorkflowID: "wf", StepID: step, Tool: "book_table",
			Arguments: json.RawMessage(`{"restaurant":"Sino","date":"` + date + `","time":"19:30"}`), ReferenceTime: ref})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := book("1", "2019-03-04", "")
	if first.Decision != client.Execute || first.ReferenceDate != "" {
		t.Fatalf("first booking: %+v", first)
	}
	if _, err := c.Complete(ctx, first.Key, first.Token, json.RawMessage(`{"booking":"B1"}`)); err != nil {
		t.Fatal(err)
	}
	// 21:00 on Friday March 1st in California (Saturday in UTC): next
	// Monday is March 4th.
	again := book("2", "next Monday", "2019-03-01T21:00:00-08:00")
	if !again.Flagged() || again.Match == nil || again.Match.Key != first.Key || again.ReferenceDate != "2019-03-01" {
		t.Fatalf("next Monday said on March 1st: %+v", again)
	}
	if notes := strings.Join(again.Notes, "\n"); !strings.Contains(notes, `"next Monday" = "2019-03-04"`) {
		t.Errorf("notes %q do not name the restated date", notes)
	}
	// Said on Tuesday March 5th, next Monday is March 11th: a new
	// booking, though its bytes are those of step 2.
	later := book("3", "next Monday", "2019-03-05")
	if later.Decision != client.Execute {
		t.Fatalf("next Monday said on March 5th: %+v", later)
	}
	// And said on the 5th again, it is that booking's duplicate.
	if twin := book("4", "next Monday", "2019-03-05"); !twin.Flagged() || twin.Match == nil || twin.Match.Key != later.Key {
		t.Fatalf("next Monday said on March 5th twice: %+v", twin)
	}
	// Said on March 1st again, the same bytes as step 3 name March 4th:
	// step 1's booking, not step 3's.
	if back := book("5", "next Monday", "2019-03-01"); !back.Flagged() || back.Match == nil || back.Match.Key != first.Key {
		t.Fatalf("next Monday said on March 1st after step 3: %+v", back)
	}
}

// TestConfirmedExecutionsRecordIt: a call checked again with confirmed
// after a confirm executes, and its record (GET /v1/records/{key}, the
// completion's answer, the workflow listing) names the earlier call it was
// confirmed as another action than; a record not confirmed has no
// confirmed field.
func TestConfirmedExecutionsRecordIt(t *testing.T) {
	e := start(t, options{})
	c := e.client("")
	ctx := context.Background()
	first := client.CheckRequest{SessionID: "s1", WorkflowID: "wf", StepID: "1", Tool: "send_email",
		Arguments: emailArgs("ann@example.com", "Hello Ann, here is your invoice for March.")}
	r1, err := c.Check(ctx, first)
	if err != nil || r1.Decision != client.Execute {
		t.Fatalf("first call: %+v %v", r1, err)
	}
	if _, err := c.Complete(ctx, r1.Key, r1.Token, json.RawMessage(`{"message_id":"m-1"}`)); err != nil {
		t.Fatal(err)
	}
	near := client.CheckRequest{SessionID: "s1", WorkflowID: "wf", StepID: "2", Tool: "send_email",
		Arguments: emailArgs("ann@example.com", "Hi Ann, here is your March invoice.")}
	asked, err := c.Check(ctx, near)
	if err != nil || asked.Decision != client.Confirm || asked.Match == nil || asked.Match.Key != r1.Key {
		t.Fatalf("reworded call: %+v %v", asked, err)
	}
	near.Confirmed = asked.Match.Key
	r2, err := c.Check(ctx, near)
	if err != nil || r2.Decision != client.Execute {
		t.Fatalf("confirmed call: %+v %v", r2, err)
	}
	status, _, body := e.raw("GET", "/v1/records/"+url.PathEscape(r2.Key), "", "", nil)
	if status != 200 || !strings.Contains(string(body), `"confirmed":"wf:1:send_email"`) {
		t.Fatalf("GET the confirmed call's record while it runs: %d %s", status, body)
	}
	done, err := c.Complete(ctx, r2.Key, r2.Token, json.RawMessage(`{"message_id":"m-2"}`))
	if err != nil || done.Confirmed != r1.Key {
		t.Fatalf("complete of the confirmed call: %+v %v", done, err)
	}
	if rec, err := c.Record(ctx, r2.Key); err != nil || rec.Confirmed != r1.Key || rec.Status != "SUCCESS" {
		t.Errorf("the confirmed call's record: %+v %v, want confirmed %q", rec, err, r1.Key)
	}
	status, _, body = e.raw("GET", "/v1/records/"+url.PathEscape(r1.Key), "", "", nil)
	if status != 200 || strings.Contains(string(body), `"confirmed"`) {
		t.Errorf("a record not confirmed: %d %s, want no confirmed field", status, body)
	}
	if wf, err := c.Workflow(ctx, "wf"); err != nil || len(wf.Steps) != 2 ||
		wf.Steps[0].Confirmed != "" || wf.Steps[1].Confirmed != r1.Key {
		t.Errorf("workflow listing: %+v %v, want step 2 alone confirmed", wf, err)
	}
}
