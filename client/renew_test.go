package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/client/clienttest"
)

// leaseServer answers a check with an execute whose lease ends lease from
// the server's now, and renewals with renewStatus (200: the lease
// extended by the lease_ms asked). It speaks the real protocol: problem
// documents, the Date header net/http sets.
type leaseServer struct {
	lease       time.Duration
	renewStatus atomic.Int64
	renewals    atomic.Int64
	leaseMS     atomic.Int64 // the last renewal's lease_ms
	completes   atomic.Int64
	fails       atomic.Int64
}

func (s *leaseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/check":
		until := time.Now().Add(s.lease).UTC().Format(time.RFC3339Nano)
		fmt.Fprintf(w, `{"decision":"execute","stage":"new","key":"k","token":"tok","lease_until":%q,"policy":"default","reason":"new","hash":"0","identity_digest":"0","timings_us":{}}`, until)
	case "/v1/renew":
		s.renewals.Add(1)
		var req struct {
			Key, Token string
			LeaseMS    int64 `json:"lease_ms"`
		}
		json.Unmarshal(body, &req)
		s.leaseMS.Store(req.LeaseMS)
		if st := s.renewStatus.Load(); st != 200 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(int(st))
			fmt.Fprintf(w, `{"type":"urn:idem:problem:stale-token","title":"x","status":%d,"detail":"token: stale","field":"token"}`, st)
			return
		}
		fmt.Fprintf(w, `{"key":"k","tool":"t","status":"PENDING","outcome":"in_progress","lease_until_ms":%d}`, time.Now().Add(time.Duration(req.LeaseMS)*time.Millisecond).UnixMilli())
	case "/v1/complete":
		s.completes.Add(1)
		io.WriteString(w, `{"key":"k","tool":"t","status":"SUCCESS","outcome":"duplicate"}`)
	case "/v1/fail":
		s.fails.Add(1)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(409)
		io.WriteString(w, `{"type":"urn:idem:problem:stale-token","title":"Conflict","status":409,"detail":"token: stale","field":"token"}`)
	}
}

func leaseClient(t *testing.T, s *leaseServer, clock Clock) *Client {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	cfg := DefaultConfig(srv.URL)
	cfg.Clock = clock
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// guardAsync runs Guard with fn in a goroutine.
func guardAsync(c *Client, fn func(ctx context.Context, key string) (json.RawMessage, error)) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := c.Guard(context.Background(), CheckRequest{SessionID: "s", IdempotencyKey: "k", Tool: "t", Arguments: json.RawMessage(`{}`)}, fn)
		done <- err
	}()
	return done
}

func TestGuardRenewsTheLeaseWhileFnRuns(t *testing.T) {
	s := &leaseServer{lease: time.Minute}
	s.renewStatus.Store(200)
	clock := clienttest.NewStepClock(time.Now())
	release := make(chan struct{})
	done := guardAsync(leaseClient(t, s, clock), func(ctx context.Context, _ string) (json.RawMessage, error) {
		select {
		case <-release:
			return json.RawMessage(`"long call done"`), nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	})
	// A third of the server's lease (its Date header rounds to the second).
	for i := range 3 {
		if d := <-clock.Waits; d < 19*time.Second || d > 21*time.Second {
			t.Fatalf("wait %d: %v, want a third of the 1 min lease", i, d)
		}
		clock.Tick(20 * time.Second)
	}
	<-clock.Waits
	if n := s.renewals.Load(); n != 3 {
		t.Errorf("%d renewals after three thirds of the lease, want 3", n)
	}
	if ms := s.leaseMS.Load(); ms < 59_000 || ms > 61_000 {
		t.Errorf("renewals asked for %d ms, want the lease's length", ms)
	}
	close(release)
	if err := <-done; err != nil || s.completes.Load() != 1 {
		t.Fatalf("Guard: %v, %d completes", err, s.completes.Load())
	}
}

func TestGuardCancelsFnWhenARenewalIsRefused(t *testing.T) {
	s := &leaseServer{lease: time.Minute}
	s.renewStatus.Store(409)
	clock := clienttest.NewStepClock(time.Now())
	var cause atomic.Value
	done := guardAsync(leaseClient(t, s, clock), func(ctx context.Context, _ string) (json.RawMessage, error) {
		<-ctx.Done()
		cause.Store(context.Cause(ctx))
		return nil, ctx.Err()
	})
	<-clock.Waits
	clock.Tick(20 * time.Second)
	err := <-done
	if c, _ := cause.Load().(error); !errors.Is(c, ErrLeaseLost) {
		t.Errorf("fn's context ended with cause %v, want ErrLeaseLost", c)
	}
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(err, context.Canceled) {
		t.Errorf("Guard: %v, want fn's error and ErrLeaseLost", err)
	}
	if s.renewals.Load() != 1 {
		t.Errorf("%d renewals, want 1", s.renewals.Load())
	}
}

func TestGuardCancelsFnWhenTheLeaseRunsOut(t *testing.T) {
	s := &leaseServer{lease: time.Minute}
	s.renewStatus.Store(503) // the server cannot be reached
	clock := clienttest.NewStepClock(time.Now())
	done := guardAsync(leaseClient(t, s, clock), func(ctx context.Context, _ string) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, context.Cause(ctx)
	})
	<-clock.Waits
	clock.Tick(20 * time.Second) // renewal 1: 503
	<-clock.Waits
	clock.Tick(20 * time.Second) // renewal 2: 503
	if d := <-clock.Waits; d > 20*time.Second {
		t.Errorf("last wait %v: want it to end with the lease", d)
	}
	clock.Tick(20 * time.Second) // the lease is over
	if err := <-done; !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Guard: %v, want ErrLeaseLost", err)
	}
	if n := s.renewals.Load(); n != 2 {
		t.Errorf("%d renewals, want 2 (the third came too late)", n)
	}
}
