package embed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	openai "github.com/sashabaranov/go-openai"
)

var (
	// ErrUnavailable wraps a transient failure of an embeddings endpoint
	// (timeout, connection error, 408, 429, 5xx, unknown) that persisted
	// through every retry.
	ErrUnavailable = errors.New("embed: endpoint unavailable")
	// ErrRejected wraps a permanent refusal of an embeddings endpoint
	// (400, 401, 403, 404, 409, 422 and other 4xx): retrying cannot help.
	ErrRejected = errors.New("embed: endpoint rejected the request")
)

// OpenAIConfig configures a client of an OpenAI-compatible embeddings
// endpoint (POST {BaseURL}/embeddings): OpenAI, Ollama, vLLM, TEI,
// llama.cpp.
type OpenAIConfig struct {
	// BaseURL is the API root, e.g. https://api.openai.com/v1 or
	// http://localhost:11434/v1 (Ollama).
	BaseURL string
	// Model is the model name sent with each request.
	Model string
	// Dimensions, when > 0, is sent as the request's "dimensions" and every
	// vector must have that length. When 0 the server's default applies and
	// the length of the first response is enforced afterwards.
	Dimensions int
	// APIKey is sent as a bearer token; empty for servers without auth.
	// The caller reads it from wherever it is kept (cmd/idem: an env var).
	APIKey string
	// Name overrides the model identifier stored with vectors; by default
	// "openai-compatible:" + Model (+ "/" + Dimensions when set).
	Name string
	// Timeout bounds each HTTP request (the whole exchange, body included).
	Timeout time.Duration
	// MaxAttempts is the number of tries per request, first one included.
	MaxAttempts int
	// InitialBackoff and MaxBackoff bound the exponential backoff between
	// tries (doubling, each wait drawn from ±50% of the curve).
	InitialBackoff, MaxBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After the client waits for; a
	// longer one fails at once with ErrUnavailable.
	MaxRetryAfter time.Duration
	// BatchSize is the most texts sent in one request.
	BatchSize int
	// Transport, if set, replaces http.DefaultTransport (tests, proxies).
	Transport http.RoundTripper
}

// DefaultOpenAIConfig returns sensible defaults; BaseURL and Model must
// still be set.
func DefaultOpenAIConfig() OpenAIConfig {
	return OpenAIConfig{
		Timeout:        10 * time.Second,
		MaxAttempts:    4,
		InitialBackoff: 200 * time.Millisecond,
		MaxBackoff:     5 * time.Second,
		MaxRetryAfter:  30 * time.Second,
		BatchSize:      128,
	}
}

// Validate reports a configuration the client cannot run with.
func (c OpenAIConfig) Validate() error {
	u, err := url.Parse(c.BaseURL)
	switch {
	case c.BaseURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("%w: BaseURL %q is not an http(s) URL", ErrConfig, c.BaseURL)
	case c.Model == "":
		return fmt.Errorf("%w: Model is empty", ErrConfig)
	case c.Dimensions < 0:
		return fmt.Errorf("%w: negative Dimensions", ErrConfig)
	case c.Timeout <= 0:
		return fmt.Errorf("%w: Timeout must be > 0 (go-openai sets none)", ErrConfig)
	case c.MaxAttempts < 1:
		return fmt.Errorf("%w: MaxAttempts must be >= 1", ErrConfig)
	case c.InitialBackoff <= 0 || c.MaxBackoff < c.InitialBackoff:
		return fmt.Errorf("%w: need 0 < InitialBackoff <= MaxBackoff", ErrConfig)
	case c.MaxRetryAfter < 0:
		return fmt.Errorf("%w: negative MaxRetryAfter", ErrConfig)
	case c.BatchSize < 1:
		return fmt.Errorf("%w: BatchSize must be >= 1", ErrConfig)
	}
	return nil
}

// OpenAI embeds texts with an OpenAI-compatible endpoint. It is safe for
// concurrent use.
type OpenAI struct {
	cfg    OpenAIConfig
	client *openai.Client
	name   string
	dim    atomic.Int64 // configured, or learned from the first response
}

// NewOpenAI returns a client for cfg.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	transport := cfg.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	oc.HTTPClient = &http.Client{Timeout: cfg.Timeout, Transport: transport}
	c := &OpenAI{cfg: cfg, client: openai.NewClientWithConfig(oc), name: cfg.Name}
	if c.name == "" {
		c.name = "openai-compatible:" + cfg.Model
		if cfg.Dimensions > 0 {
			c.name += "/" + strconv.Itoa(cfg.Dimensions)
		}
	}
	c.dim.Store(int64(cfg.Dimensions))
	return c, nil
}

// Name identifies the model.
func (c *OpenAI) Name() string { return c.name }

// Dim is the vector length: Dimensions if configured, else the length seen
// in the first successful response (0 before it).
func (c *OpenAI) Dim() int { return int(c.dim.Load()) }

// Embed returns one L2-normalized vector per text, sending at most
// BatchSize texts per request. Transient failures are retried with backoff
// and jitter, honouring Retry-After; the error then wraps ErrUnavailable or
// ErrRejected. A response with the wrong number of vectors or the wrong
// dimension is ErrResponse.
func (c *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	for i, t := range texts {
		if isBlank(t) {
			return nil, fmt.Errorf("embed text %d of %d: %w", i, len(texts), ErrEmptyText)
		}
	}
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += c.cfg.BatchSize {
		batch := texts[start:min(start+c.cfg.BatchSize, len(texts))]
		vecs, err := c.embedBatch(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("embed batch of %d with %s: %w", len(batch), c.cfg.Model, err)
		}
		out = append(out, vecs...)
	}
	return out, nil
}

func (c *OpenAI) embedBatch(ctx context.Context, batch []string) ([][]float32, error) {
	req := openai.EmbeddingRequestStrings{
		Input:          batch,
		Model:          openai.EmbeddingModel(c.cfg.Model),
		EncodingFormat: openai.EmbeddingEncodingFormatFloat,
		Dimensions:     c.cfg.Dimensions,
	}
	var last error // the real error behind a RetryAfterError
	b := &backoff.ExponentialBackOff{
		InitialInterval:     c.cfg.InitialBackoff,
		RandomizationFactor: 0.5, // jitter: each wait is drawn from ±50% of the curve
		Multiplier:          2,
		MaxInterval:         c.cfg.MaxBackoff,
	}
	res, err := backoff.Retry(ctx, func() (openai.EmbeddingResponse, error) {
		res, err := c.client.CreateEmbeddings(ctx, req)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return res, backoff.Permanent(ctx.Err())
		}
		last = classify(err)
		if errors.Is(last, ErrRejected) {
			return res, backoff.Permanent(last)
		}
		if d, ok := retryAfter(res.Header()); ok {
			if d > c.cfg.MaxRetryAfter {
				return res, backoff.Permanent(fmt.Errorf("%w (Retry-After %s exceeds %s)", last, d, c.cfg.MaxRetryAfter))
			}
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
				return res, backoff.Permanent(fmt.Errorf("%w (Retry-After %s exceeds the deadline)", last, d))
			}
			return res, &backoff.RetryAfterError{Duration: d}
		}
		return res, last
	}, backoff.WithBackOff(b), backoff.WithMaxTries(uint(c.cfg.MaxAttempts)), backoff.WithMaxElapsedTime(0))
	if err != nil {
		var ra *backoff.RetryAfterError
		if errors.As(err, &ra) && last != nil {
			err = last
		}
		return nil, err
	}
	return c.check(res, len(batch))
}

// check validates and normalizes a response for n inputs.
func (c *OpenAI) check(res openai.EmbeddingResponse, n int) ([][]float32, error) {
	if len(res.Data) != n {
		return nil, fmt.Errorf("%w: %d vectors for %d texts", ErrResponse, len(res.Data), n)
	}
	out := make([][]float32, n)
	for _, e := range res.Data {
		if e.Index < 0 || e.Index >= n || out[e.Index] != nil {
			return nil, fmt.Errorf("%w: bad or repeated index %d", ErrResponse, e.Index)
		}
		want := int(c.dim.Load())
		if want == 0 && len(e.Embedding) > 0 {
			c.dim.CompareAndSwap(0, int64(len(e.Embedding)))
			want = int(c.dim.Load())
		}
		if len(e.Embedding) != want {
			return nil, fmt.Errorf("%w: vector of %d values, want %d", ErrResponse, len(e.Embedding), want)
		}
		v := append([]float32(nil), e.Embedding...)
		if !Normalize(v) {
			return nil, fmt.Errorf("%w: zero or non-finite vector at index %d", ErrResponse, e.Index)
		}
		out[e.Index] = v
	}
	return out, nil
}

// classify wraps err with ErrUnavailable (retry) or ErrRejected (do not).
// go-openai reports servers whose error body is not OpenAI's shape (Ollama,
// TEI, vLLM: {"error": "text"}, an HTML 502 page) as a *RequestError that
// may wrap an *APIError with status 0, so *RequestError is checked first:
// its status code is the real one.
func classify(err error) error {
	var reqErr *openai.RequestError
	var apiErr *openai.APIError
	var netErr net.Error
	status := 0
	switch {
	case errors.As(err, &reqErr):
		status = reqErr.HTTPStatusCode
	case errors.As(err, &apiErr):
		status = apiErr.HTTPStatusCode
	case errors.As(err, &netErr), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %s", ErrUnavailable, redact(err))
	}
	msg := "status " + strconv.Itoa(status)
	if m := serverMessage(reqErr, apiErr, err); m != "" {
		msg += ": " + truncate(m, 200)
	}
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500, status == 0:
		return fmt.Errorf("%w: %s", ErrUnavailable, msg)
	case status >= 400:
		return fmt.Errorf("%w: %s", ErrRejected, msg)
	}
	return fmt.Errorf("%w: %s", ErrUnavailable, msg)
}

// serverMessage is the server's own error message: OpenAI's error.message,
// or the {"error": "…"} string of Ollama and TEI, or vLLM's old "message".
// Non-JSON bodies (an HTML 502 page) are not quoted.
func serverMessage(reqErr *openai.RequestError, apiErr *openai.APIError, err error) string {
	if reqErr != nil {
		var body struct {
			Error   any    `json:"error"`
			Message string `json:"message"`
		}
		if json.Unmarshal(reqErr.Body, &body) == nil {
			if s, ok := body.Error.(string); ok {
				return s
			}
			return body.Message
		}
		return ""
	}
	if apiErr != nil || errors.As(err, &apiErr) {
		return apiErr.Message
	}
	return ""
}

// redact describes a transport error without the request body or URL query.
func redact(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return ue.Op + " " + stripQuery(ue.URL) + ": timeout"
		}
		return ue.Op + " " + stripQuery(ue.URL) + ": " + truncate(ue.Err.Error(), 200)
	}
	return truncate(err.Error(), 200)
}

func stripQuery(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i]
	}
	return u
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// retryAfter parses a Retry-After header (seconds or an HTTP date).
func retryAfter(h http.Header) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}
