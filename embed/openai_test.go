package embed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
)

// embeddingsServer answers POST /v1/embeddings like the OpenAI API, with
// vector i of a request being vec(input i) of dim values. fail, if set, may
// answer instead (returning true).
type embeddingsServer struct {
	t        *testing.T
	dim      int
	attempts atomic.Int32
	mu       sync.Mutex // guards times and reqs
	times    []time.Time
	reqs     []map[string]any
	fail     func(w http.ResponseWriter, r *http.Request, attempt int) bool
	srv      *httptest.Server
}

func newEmbeddingsServer(t *testing.T, dim int, fail func(w http.ResponseWriter, r *http.Request, attempt int) bool) *embeddingsServer {
	s := &embeddingsServer{t: t, dim: dim, fail: fail}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *embeddingsServer) url() string { return s.srv.URL + "/v1" }

func (s *embeddingsServer) serve(w http.ResponseWriter, r *http.Request) {
	n := int(s.attempts.Add(1))
	s.mu.Lock()
	s.times = append(s.times, time.Now())
	s.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	if s.fail != nil && s.fail(w, r, n) {
		return
	}
	inputs, _ := req["input"].([]any)
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	var data []item
	// Answer in reverse order: clients must place vectors by index.
	for i := len(inputs) - 1; i >= 0; i-- {
		data = append(data, item{Object: "embedding", Index: i, Embedding: vecFor(inputs[i].(string), s.dim)})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"object": "list", "data": data, "model": req["model"],
		"usage": map[string]int{"prompt_tokens": 3, "total_tokens": 3},
	})
}

// vecFor is an unnormalized vector that depends on the text.
func vecFor(text string, dim int) []float32 {
	v := make([]float32, dim)
	h := xxhash.Sum64String(text)
	for i := range v {
		v[i] = float32((h>>(i%60))&0xf) + 1
	}
	return v
}

func testOpenAIConfig(url string) OpenAIConfig {
	cfg := DefaultOpenAIConfig()
	cfg.BaseURL = url
	cfg.Model = "text-embedding-3-small"
	cfg.APIKey = "sk-test"
	cfg.Timeout = 2 * time.Second
	cfg.MaxAttempts = 3
	cfg.InitialBackoff = time.Millisecond
	cfg.MaxBackoff = 5 * time.Millisecond
	return cfg
}

func TestOpenAISuccess(t *testing.T) {
	var auth string
	s := newEmbeddingsServer(t, 8, func(w http.ResponseWriter, r *http.Request, _ int) bool {
		auth = r.Header.Get("Authorization")
		return false
	})
	cfg := testOpenAIConfig(s.url())
	cfg.Dimensions = 8
	cfg.BatchSize = 2
	c, err := NewOpenAI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"a", "bb", "ccc", "dddd", "eeeee"}
	vecs, err := c.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != len(texts) {
		t.Fatalf("%d vectors for %d texts", len(vecs), len(texts))
	}
	for i, v := range vecs {
		want := vecFor(texts[i], 8)
		Normalize(want)
		if c := Cosine(v, want); c < 0.999999 {
			t.Errorf("vector %d is not the one for its text (cosine %v)", i, c)
		}
		if n := Cosine(v, v); math.Abs(math.Sqrt(dot(v, v))-1) > 1e-6 || n < 0.999999 {
			t.Errorf("vector %d is not unit length", i)
		}
	}
	if got := s.attempts.Load(); got != 3 {
		t.Errorf("%d requests for 5 texts in batches of 2, want 3", got)
	}
	if auth != "Bearer sk-test" {
		t.Errorf("Authorization %q", auth)
	}
	req := s.reqs[0]
	if req["model"] != "text-embedding-3-small" || req["dimensions"] != float64(8) || req["encoding_format"] != "float" {
		t.Errorf("request body %v", req)
	}
	if c.Dim() != 8 || c.Name() != "openai-compatible:text-embedding-3-small/8" {
		t.Errorf("Dim %d Name %q", c.Dim(), c.Name())
	}
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func TestOpenAILearnsDimension(t *testing.T) {
	s := newEmbeddingsServer(t, 6, nil)
	c, err := NewOpenAI(testOpenAIConfig(s.url()))
	if err != nil {
		t.Fatal(err)
	}
	if c.Dim() != 0 {
		t.Fatalf("Dim before any call = %d", c.Dim())
	}
	if _, err := c.Embed(context.Background(), []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if c.Dim() != 6 {
		t.Fatalf("Dim = %d, want 6", c.Dim())
	}
	if _, ok := s.reqs[0]["dimensions"]; ok {
		t.Error("dimensions sent although not configured")
	}
}

// errorReply writes a canned error response.
func errorReply(status int, contentType, body string, header ...string) func(http.ResponseWriter, *http.Request, int) bool {
	return func(w http.ResponseWriter, _ *http.Request, _ int) bool {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		io.WriteString(w, body)
		return true
	}
}

// TestOpenAIErrors checks the classification of each server's real error
// bodies: permanent ones fail after one request, transient ones are retried
// MaxAttempts times.
func TestOpenAIErrors(t *testing.T) {
	const json = "application/json"
	for _, tc := range []struct {
		name     string
		reply    func(http.ResponseWriter, *http.Request, int) bool
		want     error
		attempts int32
	}{
		{"openai 401 invalid key", errorReply(401, json, `{"error":{"message":"Incorrect API key provided: sk-test.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`), ErrRejected, 1},
		{"openai 400 too long", errorReply(400, json, `{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","param":null,"code":null}}`), ErrRejected, 1},
		{"openai 429 rate limit", errorReply(429, json, `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`), ErrUnavailable, 3},
		{"openai 500", errorReply(500, json, `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`), ErrUnavailable, 3},
		{"ollama 404 model not found", errorReply(404, json, `{"error":"model \"nomic-embed-text\" not found, try pulling it first"}`), ErrRejected, 1},
		{"ollama 500", errorReply(500, json, `{"error":"llama runner process has terminated"}`), ErrUnavailable, 3},
		{"ollama 503 busy", errorReply(503, json, `{"error":"server busy, please try again.  maximum pending requests exceeded"}`), ErrUnavailable, 3},
		{"tei 429 overloaded", errorReply(429, json, `{"error":"Model is overloaded","error_type":"overloaded"}`), ErrUnavailable, 3},
		{"tei 413 validation", errorReply(413, json, `{"error":"Input validation error: batch size 64 > maximum allowed batch size 32","error_type":"validation"}`), ErrRejected, 1},
		{"tei 422 validation", errorReply(422, json, `{"error":"Input validation error: inputs cannot be empty","error_type":"validation"}`), ErrRejected, 1},
		{"vllm 400 old format", errorReply(400, json, `{"object":"error","message":"The model does not exist.","type":"NotFoundError","param":null,"code":404}`), ErrRejected, 1},
		{"502 html page", errorReply(502, "text/html", "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"), ErrUnavailable, 3},
		{"504 empty body", errorReply(504, "text/plain", ""), ErrUnavailable, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newEmbeddingsServer(t, 4, tc.reply)
			c, err := NewOpenAI(testOpenAIConfig(s.url()))
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Embed(context.Background(), []string{"send the report"})
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			t.Logf("error: %v", err)
			if got := s.attempts.Load(); got != tc.attempts {
				t.Fatalf("%d requests, want %d", got, tc.attempts)
			}
		})
	}
}

func TestOpenAIRecoversAfterTransientErrors(t *testing.T) {
	s := newEmbeddingsServer(t, 4, func(w http.ResponseWriter, r *http.Request, attempt int) bool {
		if attempt < 3 {
			return errorReply(503, "application/json", `{"error":"server busy"}`)(w, r, attempt)
		}
		return false
	})
	c, err := NewOpenAI(testOpenAIConfig(s.url()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Embed(context.Background(), []string{"x"}); err != nil {
		t.Fatalf("third attempt should succeed: %v", err)
	}
}

// TestOpenAIRetryAfter checks that a 429's Retry-After is waited for before
// the next request (a lower bound: a timer never fires early), and that one
// beyond MaxRetryAfter or the caller's deadline fails at once.
func TestOpenAIRetryAfter(t *testing.T) {
	t.Run("honoured", func(t *testing.T) {
		s := newEmbeddingsServer(t, 4, func(w http.ResponseWriter, r *http.Request, attempt int) bool {
			if attempt == 1 {
				return errorReply(429, "application/json", `{"error":"Model is overloaded","error_type":"overloaded"}`, "Retry-After", "1")(w, r, attempt)
			}
			return false
		})
		c, err := NewOpenAI(testOpenAIConfig(s.url()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Embed(context.Background(), []string{"x"}); err != nil {
			t.Fatal(err)
		}
		if gap := s.times[1].Sub(s.times[0]); gap < time.Second {
			t.Fatalf("retried after %v despite Retry-After: 1", gap)
		}
	})
	t.Run("too long", func(t *testing.T) {
		s := newEmbeddingsServer(t, 4, errorReply(429, "application/json", `{"error":{"message":"Rate limit reached","type":"requests"}}`, "Retry-After", "120"))
		c, err := NewOpenAI(testOpenAIConfig(s.url()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Embed(context.Background(), []string{"x"}); !errors.Is(err, ErrUnavailable) || s.attempts.Load() != 1 {
			t.Fatalf("error %v after %d requests; want ErrUnavailable after 1", err, s.attempts.Load())
		}
	})
	t.Run("beyond deadline", func(t *testing.T) {
		s := newEmbeddingsServer(t, 4, errorReply(429, "application/json", `{"error":"busy"}`, "Retry-After", "5"))
		c, err := NewOpenAI(testOpenAIConfig(s.url()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := c.Embed(ctx, []string{"x"}); !errors.Is(err, ErrUnavailable) || s.attempts.Load() != 1 {
			t.Fatalf("error %v after %d requests; want ErrUnavailable after 1", err, s.attempts.Load())
		}
	})
}

func TestOpenAIHungServer(t *testing.T) {
	release := make(chan struct{})
	s := newEmbeddingsServer(t, 4, func(w http.ResponseWriter, r *http.Request, _ int) bool {
		select {
		case <-r.Context().Done():
		case <-release:
		}
		return true
	})
	defer close(release)
	cfg := testOpenAIConfig(s.url())
	cfg.Timeout = 50 * time.Millisecond
	cfg.MaxAttempts = 2
	c, err := NewOpenAI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Embed(context.Background(), []string{"x"})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("error %v, want ErrUnavailable", err)
	}
	if got := s.attempts.Load(); got != 2 {
		t.Fatalf("%d requests, want 2 (one timeout, one retry)", got)
	}
}

func TestOpenAIBadResponses(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		dims int
	}{
		{"too few vectors", `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1,0,0,0]}],"model":"m"}`, 0},
		{"too many vectors", `{"object":"list","data":[{"index":0,"embedding":[1,0,0,0]},{"index":1,"embedding":[1,0,0,0]},{"index":2,"embedding":[1,0,0,0]}],"model":"m"}`, 0},
		{"repeated index", `{"object":"list","data":[{"index":0,"embedding":[1,0,0,0]},{"index":0,"embedding":[1,0,0,0]}],"model":"m"}`, 0},
		{"wrong dimension", `{"object":"list","data":[{"index":0,"embedding":[1,0,0]},{"index":1,"embedding":[1,0,0]}],"model":"m"}`, 4},
		{"mixed dimensions", `{"object":"list","data":[{"index":0,"embedding":[1,0,0,0]},{"index":1,"embedding":[1,0,0]}],"model":"m"}`, 0},
		{"zero vector", `{"object":"list","data":[{"index":0,"embedding":[0,0,0,0]},{"index":1,"embedding":[1,0,0,0]}],"model":"m"}`, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newEmbeddingsServer(t, 4, errorReply(200, "application/json", tc.body))
			cfg := testOpenAIConfig(s.url())
			cfg.Dimensions = tc.dims
			c, err := NewOpenAI(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Embed(context.Background(), []string{"one", "two"}); !errors.Is(err, ErrResponse) {
				t.Fatalf("error %v, want ErrResponse", err)
			}
		})
	}
}

func TestOpenAIEmptyTextAndConfig(t *testing.T) {
	s := newEmbeddingsServer(t, 4, nil)
	c, err := NewOpenAI(testOpenAIConfig(s.url()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Embed(context.Background(), []string{"ok", "  "}); !errors.Is(err, ErrEmptyText) || s.attempts.Load() != 0 {
		t.Fatalf("error %v after %d requests; want ErrEmptyText and no request", err, s.attempts.Load())
	}
	for name, mut := range map[string]func(*OpenAIConfig){
		"no url":      func(c *OpenAIConfig) { c.BaseURL = "" },
		"bad scheme":  func(c *OpenAIConfig) { c.BaseURL = "ftp://x" },
		"no model":    func(c *OpenAIConfig) { c.Model = "" },
		"no timeout":  func(c *OpenAIConfig) { c.Timeout = 0 },
		"no attempts": func(c *OpenAIConfig) { c.MaxAttempts = 0 },
		"no batch":    func(c *OpenAIConfig) { c.BatchSize = 0 },
		"neg dims":    func(c *OpenAIConfig) { c.Dimensions = -1 },
	} {
		cfg := testOpenAIConfig(s.url())
		mut(&cfg)
		if _, err := NewOpenAI(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: error %v, want ErrConfig", name, err)
		}
	}
	var _ Embedder = c
}

// TestOpenAIErrorsDoNotEchoTexts checks that a server echoing the input in
// its error body does not put the text into our error message (texts are
// customers' data and errors get logged).
func TestOpenAIErrorsDoNotEchoTexts(t *testing.T) {
	const secret = "card number 4111 1111 1111 1111"
	s := newEmbeddingsServer(t, 4, func(w http.ResponseWriter, r *http.Request, _ int) bool {
		w.WriteHeader(502)
		fmt.Fprintf(w, "<html>bad gateway for input %q</html>", secret)
		return true
	})
	c, err := NewOpenAI(testOpenAIConfig(s.url()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Embed(context.Background(), []string{secret})
	if err == nil || strings.Contains(err.Error(), "4111") {
		t.Fatalf("error %q leaks the text", err)
	}
}
