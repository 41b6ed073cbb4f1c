package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/client"
	"github.com/idem-dev/idem/client/clienttest"
	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/ledger/ledgertest"
	"github.com/idem-dev/idem/server"
)

// longCall is a tool call that runs until released, or until its context
// ends, through Guard in a goroutine.
type longCall struct {
	runs    atomic.Int64
	started chan struct{}
	release chan struct{}
	cause   atomic.Value // error: why fn's context ended
	done    chan struct {
		out json.RawMessage
		err error
	}
}

func startLong(ctx context.Context, c *client.Client, req client.CheckRequest, result string) *longCall {
	l := &longCall{started: make(chan struct{}), release: make(chan struct{}), done: make(chan struct {
		out json.RawMessage
		err error
	}, 1)}
	go func() {
		out, err := c.Guard(ctx, req, func(ctx context.Context, key string) (json.RawMessage, error) {
			if l.runs.Add(1) == 1 {
				close(l.started)
			}
			select {
			case <-l.release:
				return json.RawMessage(result), nil
			case <-ctx.Done():
				l.cause.Store(context.Cause(ctx))
				return nil, ctx.Err()
			}
		})
		l.done <- struct {
			out json.RawMessage
			err error
		}{out, err}
	}()
	return l
}

// Finding 2: a tool running longer than its lease turned uncertain; a
// takeover executed it a second time while the first still ran, and the
// first worker's result was refused and lost. Guard now renews the lease
// while the tool runs: no second execution, and the result is kept.
func TestLongRunningToolKeepsItsKey(t *testing.T) {
	clk := ledgertest.NewClock(time.Now().Truncate(time.Second))
	e := start(t, options{now: clk.Now, lease: time.Minute})
	clk.Advance(time.Now().Truncate(time.Second).Sub(clk.Now())) // the ledger's clock near the Date header's
	ctx := context.Background()
	cc := clienttest.NewStepClock(time.Now())
	worker := e.clientWith("", func(cfg *client.Config) { cfg.Clock = cc })
	other := e.client("")
	req := client.CheckRequest{SessionID: "s", WorkflowID: "wf", StepID: "1", Tool: "export_report", Arguments: json.RawMessage(`{"report":"Q3"}`)}
	long := startLong(ctx, worker, req, `{"file":"q3.pdf"}`)
	<-long.started
	if d := <-cc.Waits; d < 15*time.Second || d > 21*time.Second {
		t.Fatalf("Guard waits %v before renewing, want about a third of the 1 min lease", d)
	}
	clk.Advance(50 * time.Second)
	cc.Tick(20 * time.Second) // the renewal
	<-cc.Waits                // renewed: waiting for the next one
	rec, err := other.Record(ctx, "wf:1:export_report")
	if err != nil || rec.LeaseUntil != clk.Now().Add(time.Minute).UnixMilli() {
		t.Fatalf("after the renewal: %+v %v, want the lease a minute from now", rec, err)
	}
	clk.Advance(30 * time.Second) // past the first lease, within the renewed one

	// Another worker retries and would take an uncertain key over.
	retry := req
	retry.Takeover = true
	r, err := other.Check(ctx, retry)
	if err != nil || r.Decision != client.InProgress || !r.LeaseExpiresAt.Equal(time.UnixMilli(rec.LeaseUntil)) || r.RetryAfter <= 0 {
		t.Fatalf("a takeover while the tool runs: %+v %v, want in_progress with the renewed lease end", r, err)
	}
	close(long.release)
	got := <-long.done
	if got.err != nil || string(got.out) != `{"file":"q3.pdf"}` || long.runs.Load() != 1 {
		t.Fatalf("Guard: %s %v, fn ran %d times", got.out, got.err, long.runs.Load())
	}
	if rec, err := other.Record(ctx, "wf:1:export_report"); err != nil || rec.Status != "SUCCESS" || string(rec.Result) != `{"file":"q3.pdf"}` {
		t.Fatalf("the record: %+v %v, want the long call's result", rec, err)
	}
}

// A renewal refused (the key was taken over after the lease ran out)
// cancels the tool's context.
func TestRefusedRenewalCancelsTheTool(t *testing.T) {
	clk := ledgertest.NewClock(time.Now().Truncate(time.Second))
	e := start(t, options{now: clk.Now, lease: time.Minute})
	ctx := context.Background()
	cc := clienttest.NewStepClock(time.Now())
	worker := e.clientWith("", func(cfg *client.Config) { cfg.Clock = cc })
	other := e.client("")
	req := client.CheckRequest{SessionID: "s", IdempotencyKey: "export-9", Tool: "export_report", Arguments: json.RawMessage(`{"report":"Q4"}`)}
	long := startLong(ctx, worker, req, `"never"`)
	<-long.started
	<-cc.Waits
	clk.Advance(61 * time.Second) // the worker stalled: its lease ran out
	retry := req
	retry.Takeover = true
	tk, err := other.Check(ctx, retry)
	if err != nil || tk.Decision != client.Execute {
		t.Fatalf("takeover of the lost lease: %+v %v", tk, err)
	}
	cc.Tick(20 * time.Second) // the stalled worker's renewal: refused
	got := <-long.done
	if cause, _ := long.cause.Load().(error); !errors.Is(cause, client.ErrLeaseLost) || !errors.Is(got.err, client.ErrLeaseLost) {
		t.Fatalf("fn's context ended with %v, Guard returned %v; want ErrLeaseLost", cause, got.err)
	}
	if _, err := other.Complete(ctx, tk.Key, tk.Token, json.RawMessage(`"by the new holder"`)); err != nil {
		t.Fatalf("the new holder completes: %v", err)
	}
}

// POST /v1/renew over HTTP: the lease moves, never past max_lease, and
// only the holder's token renews.
func TestRenewEndpoint(t *testing.T) {
	clk := ledgertest.NewClock(time.Now().Truncate(time.Second))
	e := start(t, options{now: clk.Now, lease: time.Minute, maxLease: 2 * time.Minute})
	ctx := context.Background()
	c := e.client("")
	start := clk.Now()
	res, err := c.Check(ctx, client.CheckRequest{SessionID: "s", IdempotencyKey: "job-1", Tool: "export_report", Arguments: json.RawMessage(`{"n":1}`)})
	if err != nil || res.Decision != client.Execute {
		t.Fatal(res, err)
	}
	clk.Advance(30 * time.Second)
	rec, err := c.Renew(ctx, res.Key, res.Token, time.Minute)
	if err != nil || rec.LeaseUntil != clk.Now().Add(time.Minute).UnixMilli() || rec.Status != "PENDING" {
		t.Fatalf("renew: %+v %v", rec, err)
	}
	clk.Advance(60 * time.Second)
	if rec, err = c.Renew(ctx, res.Key, res.Token, time.Hour); err != nil || rec.LeaseUntil != start.Add(2*time.Minute).UnixMilli() {
		t.Fatalf("renew asking for an hour: %+v %v, want the lease cut at max_lease after the claim", rec, err)
	}
	clk.Advance(30 * time.Second)
	_, err = c.Renew(ctx, res.Key, res.Token, time.Minute)
	if ae, ok := errors.AsType[*client.APIError](err); !ok || ae.Status != http.StatusConflict || ae.Type != server.ProblemLeaseLimit {
		t.Fatalf("renew at max_lease: %v, want 409 lease-limit", err)
	}
	_, err = c.Renew(ctx, res.Key, "not-the-token", time.Minute)
	if ae, ok := errors.AsType[*client.APIError](err); !ok || ae.Type != server.ProblemStaleToken || ae.Field != "token" {
		t.Fatalf("renew with another token: %v, want 409 stale-token", err)
	}
	_, err = c.Renew(ctx, "#1:t:4:none", "tok", time.Minute)
	if ae, ok := errors.AsType[*client.APIError](err); !ok || ae.Type != server.ProblemNotFound {
		t.Fatalf("renew of an unknown key: %v, want 404", err)
	}
}

// on_key_mismatch: replay keeps the old answer for a position's record
// holding other identity fields.
func TestOnKeyMismatchReplay(t *testing.T) {
	replay := funnel.DefaultPolicy()
	replay.OnKeyMismatch = funnel.ActionReplay
	e := start(t, options{policies: []funnel.Policy{replay}})
	first := e.do(`{"session_id":"s","workflow_id":"wf","step_id":"1","tool":"send_email","arguments":{"to":"ann@example.com","subject":"Invoice"}}`, "execute")
	e.complete(first, `{"message_id":"m-1"}`)
	a := e.do(`{"session_id":"s","workflow_id":"wf","step_id":"1","tool":"send_email","arguments":{"to":"bob@example.com","subject":"Invoice"}}`, "duplicate")
	if string(a.Match.Result) != `{"message_id":"m-1"}` || len(a.Notes) == 0 {
		t.Errorf("replay: %+v", a)
	}
}
