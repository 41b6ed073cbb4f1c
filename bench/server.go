package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ErrServer: the server answered a request with an error status.
var ErrServer = errors.New("bench: server error")

// ServerConfig configures a ServerChecker.
type ServerConfig struct {
	// URL is the server's base URL (http://localhost:8080).
	URL string
	// Timeout bounds each request.
	Timeout time.Duration
	// Header is added to every request (e.g. Authorization).
	Header http.Header
}

// DefaultServerConfig returns a 10 s timeout per request.
func DefaultServerConfig() ServerConfig { return ServerConfig{Timeout: 10 * time.Second} }

// Validate reports what is wrong with c.
func (c ServerConfig) Validate() error {
	if !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://") {
		return fmt.Errorf("bench server config: url: %q is not an http(s) URL", c.URL)
	}
	if c.Timeout <= 0 {
		return errors.New("bench server config: timeout: must be positive")
	}
	return nil
}

// ServerChecker replays against a running idem server over its HTTP API
// (POST /v1/check, /v1/complete, /v1/fail). The server keeps its own
// clock: in virtual time events are sent back to back, so leases do not
// expire during the replay unless it runs in real time. It is not safe for
// concurrent use.
type ServerChecker struct {
	cfg ServerConfig
	hc  *http.Client
}

// NewServerChecker checks cfg.
func NewServerChecker(cfg ServerConfig) (*ServerChecker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.URL = strings.TrimRight(cfg.URL, "/")
	return &ServerChecker{cfg: cfg, hc: &http.Client{Timeout: cfg.Timeout}}, nil
}

// SetNow does nothing: the server keeps its own clock.
func (s *ServerChecker) SetNow(int64) {}

func (s *ServerChecker) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range s.cfg.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	res, err := s.hc.Do(req)
	if err != nil {
		return fmt.Errorf("bench: POST %s: %w", path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("bench: POST %s: %w", path, err)
	}
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("%w: POST %s: %s: %s", ErrServer, path, res.Status, bytes.TrimSpace(data[:min(len(data), 300)]))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("bench: POST %s: decode: %w", path, err)
		}
	}
	return nil
}

// Check posts e to /v1/check.
func (s *ServerChecker) Check(ctx context.Context, e *Event) (Decision, error) {
	type attempt struct {
		Kind   string `json:"kind"`
		Number int    `json:"number"`
	}
	body := struct {
		Tenant    string          `json:"tenant,omitempty"`
		Session   string          `json:"session_id"`
		Workflow  string          `json:"workflow_id,omitempty"`
		Step      string          `json:"step_id,omitempty"`
		Key       string          `json:"idempotency_key,omitempty"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
		Attempt   attempt         `json:"attempt"`
	}{e.Tenant, e.Session, e.Workflow, e.Step, e.Key, e.Tool, e.Arguments, attempt{e.Attempt.Kind, e.Attempt.Number}}
	if body.Tenant == "default" {
		body.Tenant = ""
	}
	var res struct {
		Decision string `json:"decision"`
		Stage    string `json:"stage"`
		Key      string `json:"key"`
		Token    string `json:"token"`
		Policy   string `json:"policy"`
		Budget   bool   `json:"budget_exceeded"`
		Match    *struct {
			Key        string  `json:"key"`
			Similarity float64 `json:"similarity"`
		} `json:"match"`
		TimingsUS map[string]int64 `json:"timings_us"`
	}
	if err := s.post(ctx, "/v1/check", body, &res); err != nil {
		return Decision{}, err
	}
	d := Decision{Decision: res.Decision, Stage: res.Stage, Key: res.Key, Token: res.Token, Policy: res.Policy,
		Budget: res.Budget, TimingsUS: res.TimingsUS}
	if res.Match != nil {
		d.Similarity, d.MatchKey = res.Match.Similarity, res.Match.Key
	}
	return d, nil
}

// Complete posts to /v1/complete.
func (s *ServerChecker) Complete(ctx context.Context, tenant, key, token string, result json.RawMessage) error {
	return s.post(ctx, "/v1/complete", map[string]any{"key": key, "token": token, "result": result}, nil)
}

// Fail posts to /v1/fail.
func (s *ServerChecker) Fail(ctx context.Context, tenant, key, token string, errJSON json.RawMessage, transient bool) error {
	return s.post(ctx, "/v1/fail", map[string]any{"key": key, "token": token, "error": errJSON, "transient": transient}, nil)
}
