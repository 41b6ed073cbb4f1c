package judge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeModel is an OpenAI-compatible chat-completions server. It checks
// every request the way a strict server would and answers with reply.
type fakeModel struct {
	t     *testing.T
	hits  atomic.Int64
	reply func(w http.ResponseWriter, r *http.Request, req chatRequest)

	mu   sync.Mutex // guards last
	last chatRequest
}

type chatRequest struct {
	Model       string   `json:"model"`
	Temperature *float64 `json:"temperature"`
	Messages    []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Strict bool            `json:"strict"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

func (m *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.hits.Add(1)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "not found", http.StatusNotFound)
		m.t.Errorf("request to %s %s", r.Method, r.URL.Path)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
		m.t.Errorf("Authorization %q", got)
	}
	body, _ := io.ReadAll(r.Body)
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		m.t.Errorf("request body: %v", err)
	}
	m.mu.Lock()
	m.last = req
	m.mu.Unlock()
	switch {
	case req.Model != "judge-model":
		m.t.Errorf("model %q", req.Model)
	case req.Temperature == nil || *req.Temperature <= 0 || *req.Temperature > 1e-6:
		m.t.Errorf("temperature %v, want present and near zero", req.Temperature)
	case req.ResponseFormat == nil || req.ResponseFormat.Type != "json_schema" || req.ResponseFormat.JSONSchema == nil:
		m.t.Errorf("response_format %+v, want json_schema", req.ResponseFormat)
	case !req.ResponseFormat.JSONSchema.Strict:
		m.t.Error("json_schema not strict")
	case len(req.Messages) != 2 || req.Messages[0].Role != "system" || req.Messages[1].Role != "user":
		m.t.Errorf("messages %+v", req.Messages)
	}
	if req.ResponseFormat != nil && req.ResponseFormat.JSONSchema != nil {
		var s struct {
			Required             []string `json:"required"`
			AdditionalProperties *bool    `json:"additionalProperties"`
		}
		_ = json.Unmarshal(req.ResponseFormat.JSONSchema.Schema, &s)
		if strings.Join(s.Required, ",") != "duplicate,confidence,reason" || s.AdditionalProperties == nil || *s.AdditionalProperties {
			m.t.Errorf("schema %s", req.ResponseFormat.JSONSchema.Schema)
		}
	}
	m.reply(w, r, req)
}

func (m *fakeModel) lastRequest() chatRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// completion writes a chat completion whose message content is content.
func completion(content string) func(http.ResponseWriter, *http.Request, chatRequest) {
	return func(w http.ResponseWriter, _ *http.Request, _ chatRequest) {
		w.Header().Set("Content-Type", "application/json")
		msg, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "judge-model",
			"choices": []any{map[string]any{
				"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": content},
			}},
			"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
		})
		w.Write(msg)
	}
}

func status(code int, body string, header ...string) func(http.ResponseWriter, *http.Request, chatRequest) {
	return func(w http.ResponseWriter, _ *http.Request, _ chatRequest) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

func newJudge(t *testing.T, reply func(http.ResponseWriter, *http.Request, chatRequest), edit ...func(*Config)) (*Client, *fakeModel) {
	t.Helper()
	m := &fakeModel{t: t, reply: reply}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	cfg := DefaultConfig()
	cfg.Enabled = true
	cfg.BaseURL = srv.URL + "/v1"
	cfg.Model = "judge-model"
	cfg.APIKey = "sk-test"
	for _, e := range edit {
		e(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, m
}

var emailReq = Request{
	Tool:          "send_email",
	Schema:        json.RawMessage(`{"type":"object","properties":{"to":{"type":"string","format":"email"},"body":{"type":"string"}}}`),
	Earlier:       []byte(`{"body":"Your invoice INV-77 is attached.","to":"ann@example.com"}`),
	Current:       []byte(`{"body":"Attached is invoice INV-77.","to":"ann@example.com"}`),
	EarlierStatus: "SUCCESS",
}

func TestCompare(t *testing.T) {
	long := strings.Repeat("x", 1025)
	tests := []struct {
		name    string
		reply   func(http.ResponseWriter, *http.Request, chatRequest)
		want    Verdict
		wantErr error
		status  int
	}{
		{"duplicate", completion(`{"duplicate": true, "confidence": 0.93, "reason": "Same recipient and invoice; only the wording differs."}`),
			Verdict{Duplicate: true, Confidence: 0.93, Reason: "Same recipient and invoice; only the wording differs."}, nil, 0},
		{"distinct", completion(`{"duplicate": false, "confidence": 0.8, "reason": "  Different invoice number.  "}`),
			Verdict{Duplicate: false, Confidence: 0.8, Reason: "Different invoice number."}, nil, 0},
		{"confidence bounds are inclusive", completion(`{"duplicate": false, "confidence": 0, "reason": "unsure"}`),
			Verdict{Confidence: 0, Reason: "unsure"}, nil, 0},
		{"malformed JSON content", completion(`{"duplicate": true, "confidence": 0.9, "reason": "same`), Verdict{}, ErrInvalidVerdict, 0},
		{"prose instead of JSON", completion(`Yes, these are duplicates.`), Verdict{}, ErrInvalidVerdict, 0},
		{"fenced JSON", completion("```json\n{\"duplicate\": true, \"confidence\": 0.9, \"reason\": \"same\"}\n```"), Verdict{}, ErrInvalidVerdict, 0},
		{"missing duplicate", completion(`{"confidence": 0.9, "reason": "same"}`), Verdict{}, ErrInvalidVerdict, 0},
		{"missing confidence", completion(`{"duplicate": true, "reason": "same"}`), Verdict{}, ErrInvalidVerdict, 0},
		{"missing reason", completion(`{"duplicate": true, "confidence": 0.9}`), Verdict{}, ErrInvalidVerdict, 0},
		{"null field", completion(`{"duplicate": null, "confidence": 0.9, "reason": "same"}`), Verdict{}, ErrInvalidVerdict, 0},
		{"duplicate as string", completion(`{"duplicate": "true", "confidence": 0.9, "reason": "same"}`), Verdict{}, ErrInvalidVerdict, 0},
		{"confidence above 1", completion(`{"duplicate": true, "confidence": 1.5, "reason": "same"}`), Verdict{}, ErrInvalidVerdict, 0},
		{"negative confidence", completion(`{"duplicate": true, "confidence": -0.1, "reason": "same"}`), Verdict{}, ErrInvalidVerdict, 0},
		{"empty reason", completion(`{"duplicate": true, "confidence": 0.9, "reason": "  "}`), Verdict{}, ErrInvalidVerdict, 0},
		{"reason too long", completion(`{"duplicate": true, "confidence": 0.9, "reason": "` + long + `"}`), Verdict{}, ErrInvalidVerdict, 0},
		{"unknown field", completion(`{"duplicate": true, "confidence": 0.9, "reason": "same", "note": 1}`), Verdict{}, ErrInvalidVerdict, 0},
		{"two objects", completion(`{"duplicate": true, "confidence": 0.9, "reason": "same"} {"duplicate": false}`), Verdict{}, ErrInvalidVerdict, 0},
		{"empty content", completion(``), Verdict{}, ErrInvalidVerdict, 0},
		{"no choices", status(200, `{"id":"x","object":"chat.completion","choices":[]}`), Verdict{}, ErrInvalidVerdict, 0},
		{"refusal", func(w http.ResponseWriter, _ *http.Request, _ chatRequest) {
			io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"","refusal":"I can't help with that."}}]}`)
		}, Verdict{}, ErrInvalidVerdict, 0},
		{"500", status(500, `{"error":{"message":"internal error","type":"server_error"}}`), Verdict{}, ErrUnavailable, 500},
		{"429", status(429, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, "Retry-After", "2"),
			Verdict{}, ErrUnavailable, 429},
		{"Ollama-style error body", status(404, `{"error":"model \"judge-model\" not found, try pulling it first"}`), Verdict{}, ErrUnavailable, 404},
		{"Ollama-style 500", status(500, `{"error":"llama runner process has terminated"}`), Verdict{}, ErrUnavailable, 500},
		{"HTML 502", status(502, `<html><body>Bad Gateway</body></html>`), Verdict{}, ErrUnavailable, 502},
		{"200 that is not a completion", status(200, `<html>hello</html>`), Verdict{}, ErrUnavailable, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, m := newJudge(t, tt.reply)
			got, err := c.Compare(context.Background(), emailReq)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if got != (Verdict{}) {
					t.Fatalf("an error came with a verdict: %+v", got)
				}
				var se *StatusError
				if tt.status != 0 && (!errors.As(err, &se) || se.StatusCode() != tt.status) {
					t.Fatalf("err = %v, want status %d", err, tt.status)
				}
				if m.hits.Load() != 1 {
					t.Fatalf("%d requests, want 1 (no retries)", m.hits.Load())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPromptCarriesTheCalls(t *testing.T) {
	c, m := newJudge(t, completion(`{"duplicate": true, "confidence": 0.9, "reason": "same"}`))
	if _, err := c.Compare(context.Background(), emailReq); err != nil {
		t.Fatal(err)
	}
	req := m.lastRequest()
	sys, user := req.Messages[0].Content, req.Messages[1].Content
	for _, want := range []string{"repeat the side effect", "identifier", "amount", "recipient", "date", "negation or reversal"} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q", want)
		}
	}
	data := user[strings.IndexByte(user, '{'):]
	var got struct {
		Tool    string          `json:"tool"`
		Schema  json.RawMessage `json:"tool_schema"`
		Earlier struct {
			Status    string          `json:"status"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"earlier_call"`
		Current struct {
			Arguments json.RawMessage `json:"arguments"`
		} `json:"new_call"`
	}
	if err := json.Unmarshal([]byte(data), &got); err != nil {
		t.Fatalf("user message is not JSON data: %v\n%s", err, user)
	}
	if got.Tool != "send_email" || got.Earlier.Status != "SUCCESS" ||
		string(got.Earlier.Arguments) != string(emailReq.Earlier) || string(got.Current.Arguments) != string(emailReq.Current) ||
		string(got.Schema) != string(emailReq.Schema) {
		t.Fatalf("user message %s", data)
	}
	// Without a schema the field is absent, not null.
	r := emailReq
	r.Schema, r.Current = nil, []byte(`{"to":"bob@example.com"}`)
	if _, err := c.Compare(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if u := m.lastRequest().Messages[1].Content; strings.Contains(u, "tool_schema") {
		t.Fatalf("schema-less request mentions tool_schema: %s", u)
	}
}

func TestErrorsNeverCarryArguments(t *testing.T) {
	// A server that echoes the request in its error, as some proxies do.
	echo := func(w http.ResponseWriter, _ *http.Request, req chatRequest) {
		w.WriteHeader(400)
		b, _ := json.Marshal(map[string]string{"error": "bad request: " + req.Messages[1].Content})
		w.Write(b)
	}
	c, _ := newJudge(t, echo)
	_, err := c.Compare(context.Background(), emailReq)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "ann@example.com") || strings.Contains(err.Error(), "INV-77") {
		t.Fatalf("error text carries arguments: %v", err)
	}
}

func TestTimeouts(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	slow := func(w http.ResponseWriter, r *http.Request, _ chatRequest) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	t.Run("caller's deadline", func(t *testing.T) {
		c, _ := newJudge(t, slow)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() { _, err := c.Compare(ctx, emailReq); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want ErrTimeout wrapping context.DeadlineExceeded", err)
			}
		case <-time.After(10 * time.Second): // liveness guard, not a timing assertion
			t.Fatal("Compare did not return after its deadline")
		}
	})
	t.Run("Config.Timeout without a caller deadline", func(t *testing.T) {
		c, _ := newJudge(t, slow, func(c *Config) { c.Timeout = 30 * time.Millisecond })
		done := make(chan error, 1)
		go func() { _, err := c.Compare(context.Background(), emailReq); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("err = %v, want ErrTimeout", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Compare did not return after Config.Timeout")
		}
	})
	t.Run("cancelled caller", func(t *testing.T) {
		c, _ := newJudge(t, slow)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := c.Compare(ctx, emailReq); !errors.Is(err, ErrTimeout) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("timeouts are not cached", func(t *testing.T) {
		var calls atomic.Int64
		c, m := newJudge(t, func(w http.ResponseWriter, r *http.Request, req chatRequest) {
			if calls.Add(1) == 1 {
				slow(w, r, req)
				return
			}
			completion(`{"duplicate": false, "confidence": 0.7, "reason": "different"}`)(w, r, req)
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		if _, err := c.Compare(ctx, emailReq); !errors.Is(err, ErrTimeout) {
			t.Fatalf("err = %v", err)
		}
		v, err := c.Compare(context.Background(), emailReq)
		if err != nil || v.Cached || v.Reason != "different" || m.hits.Load() != 2 {
			t.Fatalf("second call %+v, %v, %d hits", v, err, m.hits.Load())
		}
	})
}

func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	cfg := DefaultConfig()
	cfg.Enabled, cfg.BaseURL, cfg.Model = true, url+"/v1", "judge-model"
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compare(context.Background(), emailReq); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

func TestCache(t *testing.T) {
	c, m := newJudge(t, completion(`{"duplicate": true, "confidence": 0.9, "reason": "same"}`))
	ctx := context.Background()
	first, err := c.Compare(ctx, emailReq)
	if err != nil || first.Cached {
		t.Fatalf("first: %+v %v", first, err)
	}
	second, err := c.Compare(ctx, emailReq)
	if err != nil || !second.Cached || second.Reason != "same" || !second.Duplicate {
		t.Fatalf("second: %+v %v", second, err)
	}
	if n := m.hits.Load(); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
	// Status and schema are context, not identity: still a hit.
	r := emailReq
	r.EarlierStatus, r.Schema = "PENDING", nil
	if v, _ := c.Compare(ctx, r); !v.Cached {
		t.Fatal("same pair with another status missed the cache")
	}
	// The key is order-sensitive, and includes the tool.
	swapped := emailReq
	swapped.Earlier, swapped.Current = emailReq.Current, emailReq.Earlier
	otherTool := emailReq
	otherTool.Tool = "send_sms"
	for _, r := range []Request{swapped, otherTool} {
		if v, err := c.Compare(ctx, r); err != nil || v.Cached {
			t.Fatalf("%+v: %+v %v, want a model call", r.Tool, v, err)
		}
	}
	if n := m.hits.Load(); n != 3 {
		t.Fatalf("%d model calls, want 3", n)
	}
}

func TestCacheIsBounded(t *testing.T) {
	c, m := newJudge(t, completion(`{"duplicate": false, "confidence": 0.9, "reason": "different"}`), func(c *Config) { c.CacheSize = 2 })
	ctx := context.Background()
	req := func(i int) Request {
		r := emailReq
		r.Current = []byte(fmt.Sprintf(`{"to":"u%d@example.com"}`, i))
		return r
	}
	for i := range 3 {
		if _, err := c.Compare(ctx, req(i)); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := c.Compare(ctx, req(2)); !v.Cached {
		t.Fatal("most recent pair not cached")
	}
	if v, _ := c.Compare(ctx, req(0)); v.Cached {
		t.Fatal("oldest pair still cached past CacheSize")
	}
	if n := m.hits.Load(); n != 4 {
		t.Fatalf("%d model calls, want 4", n)
	}
}

func TestErrorsAreNotCached(t *testing.T) {
	var calls atomic.Int64
	c, m := newJudge(t, func(w http.ResponseWriter, r *http.Request, req chatRequest) {
		if calls.Add(1) == 1 {
			status(503, `{"error":"loading model"}`)(w, r, req)
			return
		}
		completion(`{"duplicate": true, "confidence": 0.9, "reason": "same"}`)(w, r, req)
	})
	if _, err := c.Compare(context.Background(), emailReq); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if v, err := c.Compare(context.Background(), emailReq); err != nil || v.Cached || m.hits.Load() != 2 {
		t.Fatalf("after an error: %+v %v, %d hits", v, err, m.hits.Load())
	}
}

func TestSingleflight(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	c, m := newJudge(t, func(w http.ResponseWriter, r *http.Request, req chatRequest) {
		entered <- struct{}{}
		<-release
		completion(`{"duplicate": true, "confidence": 0.9, "reason": "same"}`)(w, r, req)
	})
	const n = 8
	var wg sync.WaitGroup
	verdicts := make([]Verdict, n)
	errs := make([]error, n)
	wg.Add(1)
	go func() { defer wg.Done(); verdicts[0], errs[0] = c.Compare(context.Background(), emailReq) }()
	<-entered // the first call is at the model
	for i := 1; i < n; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); verdicts[i], errs[i] = c.Compare(context.Background(), emailReq) }()
	}
	time.Sleep(20 * time.Millisecond) // let them join the flight (late ones hit the cache instead)
	close(release)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || !verdicts[i].Duplicate || verdicts[i].Reason != "same" {
			t.Fatalf("caller %d: %+v %v", i, verdicts[i], errs[i])
		}
	}
	if h := m.hits.Load(); h != 1 {
		t.Fatalf("%d model calls for %d identical concurrent comparisons, want 1", h, n)
	}
}

func TestDisabled(t *testing.T) {
	c, err := New(DefaultConfig()) // disabled: no model, no URL needed
	if err != nil {
		t.Fatal(err)
	}
	if c.Enabled() {
		t.Fatal("enabled by default")
	}
	if _, err := c.Compare(context.Background(), emailReq); !errors.Is(err, ErrDisabled) {
		t.Fatalf("err = %v, want ErrDisabled", err)
	}
}

func TestBadInput(t *testing.T) {
	c, m := newJudge(t, completion(`{"duplicate": true, "confidence": 0.9, "reason": "same"}`), func(c *Config) { c.MaxInputBytes = 400 })
	tests := []struct {
		name string
		edit func(*Request)
	}{
		{"no tool", func(r *Request) { r.Tool = "" }},
		{"earlier not JSON", func(r *Request) { r.Earlier = []byte(`{"to":`) }},
		{"new not JSON", func(r *Request) { r.Current = nil }},
		{"schema not JSON", func(r *Request) { r.Schema = json.RawMessage(`{type: object}`) }},
		{"too large", func(r *Request) { r.Current = []byte(`"` + strings.Repeat("a", 400) + `"`) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := emailReq
			tt.edit(&r)
			if _, err := c.Compare(context.Background(), r); !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("err = %v, want ErrInvalidInput", err)
			}
		})
	}
	if m.hits.Load() != 0 {
		t.Fatal("bad input reached the model")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"no URL", func(c *Config) { c.BaseURL = "" }},
		{"not http", func(c *Config) { c.BaseURL = "ftp://x/v1" }},
		{"no model", func(c *Config) { c.Model = "" }},
		{"no timeout", func(c *Config) { c.Timeout = 0 }},
		{"zero temperature (go-openai would omit it)", func(c *Config) { c.Temperature = 0 }},
		{"temperature too high", func(c *Config) { c.Temperature = 3 }},
		{"no reason room", func(c *Config) { c.MaxReasonBytes = 0 }},
		{"no input room", func(c *Config) { c.MaxInputBytes = 0 }},
		{"no cache", func(c *Config) { c.CacheSize = 0 }},
		{"reasoning model (temperature fixed at 1)", func(c *Config) { c.Model = "o3-mini" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Enabled, cfg.Model = true, "m"
			tt.edit(&cfg)
			if _, err := New(cfg); !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
		})
	}
	cfg := DefaultConfig()
	cfg.Enabled, cfg.Model = true, "m"
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults with a model: %v", err)
	}
}
