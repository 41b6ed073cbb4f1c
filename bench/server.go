package bench

import (
	"context"
	"encoding/json"
	"time"

	"github.com/idem-dev/idem/client"
)

// ServerChecker replays against a running idem server through the client
// package (POST /v1/check, /v1/complete, /v1/fail). The server keeps its
// own clock: in virtual time events are sent back to back, in order, so
// an outcome due before an event is still reported before it, but leases
// do not expire during the replay unless it runs in real time. The
// server takes the tenant from the API key: the events' tenant field is
// not sent. It is safe for use by one replay at a time.
type ServerChecker struct {
	c *client.Client
}

// NewServerChecker returns a checker for the server cfg names.
func NewServerChecker(cfg client.Config) (*ServerChecker, error) {
	c, err := client.New(cfg)
	if err != nil {
		return nil, err
	}
	return &ServerChecker{c: c}, nil
}

// SetNow does nothing: the server keeps its own clock.
func (s *ServerChecker) SetNow(int64) {}

// Check posts e to /v1/check.
func (s *ServerChecker) Check(ctx context.Context, e *Event) (Decision, error) {
	start := time.Now()
	res, err := s.c.Check(ctx, client.CheckRequest{
		SessionID: e.Session, WorkflowID: e.Workflow, StepID: e.Step, IdempotencyKey: e.Key,
		Tool: e.Tool, Arguments: e.Arguments, ReferenceTime: e.ReferenceTime,
		Attempt: &client.Attempt{Kind: e.Attempt.Kind, Number: e.Attempt.Number},
	})
	if err != nil {
		return Decision{}, err
	}
	d := Decision{Decision: res.Decision, Stage: res.Stage, Key: res.Key, Token: res.Token, Policy: res.Policy,
		Budget: res.BudgetExceeded, TimingsUS: res.TimingsUS}
	if d.TimingsUS == nil {
		d.TimingsUS = map[string]int64{}
	}
	// The round trip as the agent sees it.
	d.TimingsUS["round_trip"] = time.Since(start).Microseconds()
	if res.Match != nil {
		d.Similarity, d.MatchKey = res.Match.Similarity, res.Match.Key
	}
	return d, nil
}

// Complete posts to /v1/complete.
func (s *ServerChecker) Complete(ctx context.Context, _, key, token string, result json.RawMessage) error {
	_, err := s.c.Complete(ctx, key, token, result)
	return err
}

// Fail posts to /v1/fail.
func (s *ServerChecker) Fail(ctx context.Context, _, key, token string, errJSON json.RawMessage, transient bool) error {
	_, err := s.c.Fail(ctx, key, token, errJSON, transient)
	return err
}
