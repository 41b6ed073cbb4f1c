package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// fake is an idem server that answers checks from a script, speaking the
// real protocol (problem documents, the replay header).
type fake struct {
	checks    atomic.Int64
	answers   []string // check bodies, in order; the last repeats
	completes atomic.Int64
	fails     atomic.Int64
	lastFail  atomic.Value // string
	status    int          // when set, every complete answers it
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "content type", http.StatusUnsupportedMediaType)
		return
	}
	switch r.URL.Path {
	case "/v1/check":
		var req CheckRequest
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		n := int(f.checks.Add(1)) - 1
		a := f.answers[min(n, len(f.answers)-1)]
		if strings.Contains(a, `"duplicate"`) {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, a)
	case "/v1/complete":
		f.completes.Add(1)
		if f.status != 0 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(f.status)
			io.WriteString(w, `{"type":"about:blank","title":"Conflict","status":409,"detail":"token: stale","field":"token"}`)
			return
		}
		io.WriteString(w, `{"key":"k","tool":"t","status":"SUCCESS","next_check":"replay_result"}`)
	case "/v1/fail":
		f.fails.Add(1)
		f.lastFail.Store(string(body))
		io.WriteString(w, `{"key":"k","tool":"t","status":"FAILED","next_check":"execute"}`)
	default:
		http.NotFound(w, r)
	}
}

func newFake(t *testing.T, f *fake) *Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cfg := DefaultConfig(srv.URL)
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const execute = `{"decision":"execute","stage":"new","key":"k","token":"tok","policy":"default","reason":"new","hash":"0","identity_digest":"0","timings_us":{}}`

func TestGuardWaitsABoundedNumberOfTimes(t *testing.T) {
	f := &fake{answers: []string{`{"decision":"in_progress","stage":"key","key":"k","reason":"running","match":{"key":"k","tool":"t","status":"PENDING","similarity":1,"created_at_ms":1}}`}}
	c := newFake(t, f)
	_, err := c.Guard(context.Background(), CheckRequest{SessionID: "s"}, func(context.Context, string) (json.RawMessage, error) {
		t.Error("fn ran while in progress")
		return nil, nil
	})
	if !errors.Is(err, ErrInProgress) || f.checks.Load() != 3 {
		t.Errorf("%v after %d checks, want ErrInProgress after 3", err, f.checks.Load())
	}
	// in progress, then the winner's result.
	f2 := &fake{answers: []string{f.answers[0], `{"decision":"duplicate","stage":"key","key":"k","reason":"done","match":{"key":"k","tool":"t","status":"SUCCESS","result":{"ok":1},"similarity":1,"created_at_ms":1}}`}}
	out, err := newFake(t, f2).Guard(context.Background(), CheckRequest{SessionID: "s"}, nil)
	if err != nil || string(out) != `{"ok":1}` {
		t.Errorf("%s %v", out, err)
	}
}

func TestGuardRecordsFailuresByClass(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		transient bool
	}{
		{"unknown error", errors.New("boom"), true},
		{"timeout", context.DeadlineExceeded, true},
		{"HTTP 404", &APIError{Status: 404}, false},
		{"HTTP 503", &APIError{Status: 503}, true},
		{"marked permanent", Permanent(errors.New("no such user")), false},
		{"marked transient", Transient(&APIError{Status: 400}), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fake{answers: []string{execute}}
			_, err := newFake(t, f).Guard(context.Background(), CheckRequest{SessionID: "s"}, func(context.Context, string) (json.RawMessage, error) { return nil, tc.err })
			if !errors.Is(err, tc.err) {
				t.Errorf("Guard returned %v, want fn's error", err)
			}
			var body struct {
				Transient bool `json:"transient"`
			}
			json.Unmarshal([]byte(f.lastFail.Load().(string)), &body)
			if f.fails.Load() != 1 || body.Transient != tc.transient {
				t.Errorf("fail sent %s, want transient=%v", f.lastFail.Load(), tc.transient)
			}
		})
	}
}

func TestGuardReportsUnrecordedOutcome(t *testing.T) {
	f := &fake{answers: []string{execute}, status: 409}
	out, err := newFake(t, f).Guard(context.Background(), CheckRequest{SessionID: "s"}, func(_ context.Context, key string) (json.RawMessage, error) {
		if key != "k" {
			t.Errorf("fn got key %q", key)
		}
		return json.RawMessage(`"done"`), nil
	})
	var ae *APIError
	if string(out) != `"done"` || !errors.Is(err, ErrNotRecorded) || !errors.As(err, &ae) || ae.Status != 409 || ae.Field != "token" {
		t.Errorf("%s %v", out, err)
	}
}

func TestGuardRecordsDespiteCancelledContext(t *testing.T) {
	f := &fake{answers: []string{execute}}
	ctx, cancel := context.WithCancel(context.Background())
	out, err := newFake(t, f).Guard(ctx, CheckRequest{SessionID: "s"}, func(context.Context, string) (json.RawMessage, error) {
		cancel() // the caller gives up while the effect happens
		return json.RawMessage(`1`), nil
	})
	if err != nil || string(out) != "1" || f.completes.Load() != 1 {
		t.Errorf("%s %v, %d completes", out, err, f.completes.Load())
	}
}

func TestConfigValidate(t *testing.T) {
	for _, u := range []string{"", "localhost:8080", "ftp://x"} {
		if _, err := New(DefaultConfig(u)); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
}
