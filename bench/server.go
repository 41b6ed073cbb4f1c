package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/idem-dev/idem/client"
)

// ServerChecker replays against a running idem server through the client
// package (POST /v1/check, /v1/complete, /v1/fail). The server keeps its
// own clock: in virtual time events are sent back to back, in order, so
// an outcome due before an event is still reported before it, but leases
// do not expire during the replay unless it runs in real time. The
// server takes the tenant from the API key: the events' tenant field is
// not sent.
//
// The server keeps what earlier replays wrote, so every session, workflow
// and explicit key is sent prefixed with the run id ("<run id>/chat-42"):
// a second replay of the same set against the same server is a fresh
// run, not a stream of duplicates of the first. Keys in the decisions
// are reported without the prefix. It is safe for use by one replay at a
// time.
type ServerChecker struct {
	c      *client.Client
	prefix string // run id + "/"
}

// NewServerChecker returns a checker for the server cfg names, whose
// sessions, workflows and keys are namespaced by runID (empty: a random
// one; see RunID).
func NewServerChecker(cfg client.Config, runID string) (*ServerChecker, error) {
	c, err := client.New(cfg)
	if err != nil {
		return nil, err
	}
	if runID == "" {
		runID = "bench-" + strings.ToLower(rand.Text()[:10])
	}
	if strings.ContainsAny(runID, "/:#") {
		return nil, fmt.Errorf("bench: run id %q: must not hold '/', ':' or '#'", runID)
	}
	return &ServerChecker{c: c, prefix: runID + "/"}, nil
}

// RunID is the namespace of this checker's sessions, workflows and keys.
func (s *ServerChecker) RunID() string { return strings.TrimSuffix(s.prefix, "/") }

// scoped prefixes a session, workflow or key with the run id; empty stays
// empty.
func (s *ServerChecker) scoped(id string) string {
	if id == "" {
		return ""
	}
	return s.prefix + id
}

// SetNow does nothing: the server keeps its own clock.
func (s *ServerChecker) SetNow(int64) {}

// Check posts e to /v1/check.
func (s *ServerChecker) Check(ctx context.Context, e *Event) (Decision, error) {
	start := time.Now()
	res, err := s.c.Check(ctx, client.CheckRequest{
		SessionID: s.scoped(e.Session), WorkflowID: s.scoped(e.Workflow), StepID: e.Step, IdempotencyKey: s.scoped(e.Key),
		Tool: e.Tool, Arguments: e.Arguments, ReferenceTime: e.ReferenceTime,
		Attempt: &client.Attempt{Kind: e.Attempt.Kind, Number: e.Attempt.Number},
	})
	if err != nil {
		return Decision{}, err
	}
	d := Decision{Decision: res.Decision, Stage: res.Stage, Key: strings.TrimPrefix(res.Key, s.prefix), Token: res.Token, Policy: res.Policy,
		Budget: res.BudgetExceeded, TimingsUS: res.TimingsUS}
	if d.TimingsUS == nil {
		d.TimingsUS = map[string]int64{}
	}
	// The round trip as the agent sees it.
	d.TimingsUS["round_trip"] = time.Since(start).Microseconds()
	if res.Match != nil {
		d.Similarity, d.MatchKey = res.Match.Similarity, strings.TrimPrefix(res.Match.Key, s.prefix)
	}
	return d, nil
}

// Complete posts to /v1/complete.
func (s *ServerChecker) Complete(ctx context.Context, _, key, token string, result json.RawMessage) error {
	_, err := s.c.Complete(ctx, s.scoped(key), token, result)
	return err
}

// Fail posts to /v1/fail.
func (s *ServerChecker) Fail(ctx context.Context, _, key, token string, errJSON json.RawMessage, transient bool) error {
	_, err := s.c.Fail(ctx, s.scoped(key), token, errJSON, transient)
	return err
}
