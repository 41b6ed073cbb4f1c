// Package server is idem's HTTP transport: it decodes requests, calls the
// funnel and the ledger, and encodes their answers. It decides nothing
// itself.
//
// The API is versioned under /v1 and described by the OpenAPI 3.1
// document served at /openapi.json (openapi.json in this directory, which
// a test checks against the handlers):
//
//	POST   /v1/check           decide a tool call: execute, duplicate, in_progress, confirm, uncertain
//	POST   /v1/complete        record the result of an executed call
//	POST   /v1/fail            record its failure, transient or permanent
//	POST   /v1/renew           extend the lease of a call still running
//	GET    /v1/records/{key}   one record (key path-escaped)
//	DELETE /v1/records/{key}   forget a wrong record (force=true: also one in progress)
//	GET    /v1/workflows/{id}  a workflow's steps and their states
//	GET    /healthz, /readyz, /metrics, /openapi.json
//
// Bodies are JSON, decoded strictly: the content type must be
// application/json, the size is bounded, unknown fields and trailing data
// are refused, strings must be valid UTF-8. Errors are RFC 9457
// application/problem+json with one type URI per class of error (the
// Problem* constants) and a detail naming the field; problemOf is the one
// place that maps errors to problems.
//
// Auth: with API keys configured (as SHA-256 hashes, each naming a
// tenant), every /v1 request needs "Authorization: Bearer <key>" and acts
// in its key's tenant; with none, the server serves only on a loopback
// address, as tenant "default". Health, readiness, metrics and the
// document need no key.
package server

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/ledger"
)

// OpenAPI is the API's OpenAPI 3.1 document, served at /openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

// Checker decides checks (*funnel.Funnel provides it).
type Checker interface {
	Check(ctx context.Context, req funnel.Request) (funnel.Result, error)
}

// Ledger is what the server needs of the ledger beyond the funnel
// (*ledger.Ledger provides it).
type Ledger interface {
	Complete(ctx context.Context, tenant, key, token string, result json.RawMessage) (ledger.Record, error)
	Fail(ctx context.Context, tenant, key, token string, errJSON json.RawMessage, class ledger.ErrorClass) (ledger.Record, error)
	Renew(ctx context.Context, tenant, key, token string, lease time.Duration) (ledger.Record, error)
	Get(ctx context.Context, tenant, key string) (ledger.Claim, error)
	Workflow(ctx context.Context, tenant, workflow string) ([]ledger.Record, error)
	Forget(ctx context.Context, tenant, key string, force bool) error
}

// Deps are what the server calls.
type Deps struct {
	Funnel Checker // required
	Ledger Ledger  // required
	// Ready reports whether the store is open and the encoder loaded
	// (GET /readyz); nil means always ready.
	Ready func(ctx context.Context) error
	// CacheStats reports the embedding cache's hits and misses, for
	// metrics; nil when there is no cache.
	CacheStats func() (hits, misses uint64)
	// ViewStats reports the funnel's session views, for metrics; nil
	// leaves them out.
	ViewStats func() funnel.ViewStats
	// QueueStats reports the funnel's encoder queue, for metrics; nil
	// leaves it out.
	QueueStats func() funnel.QueueStats
	// SyncStats reports the store's sync rounds, for metrics; nil (a
	// store without them, or sync writes off) leaves them out.
	SyncStats func() ledger.SyncStats
}

// Config configures a Server. Start from DefaultConfig.
type Config struct {
	// Addr is the address to listen on (host:port; port 0 picks one).
	Addr string
	// Keys maps the SHA-256 of each API key to its tenant. Empty: no auth,
	// tenant "default", and Addr must be a loopback address.
	Keys map[[32]byte]string
	// MaxBodyBytes bounds a request body (413 past it).
	MaxBodyBytes int64
	// MaxWait is the longest wait a check may ask for; it stretches the
	// write timeout.
	MaxWait time.Duration
	// Tools are the tool names metrics may use as label values (the first
	// MaxToolLabels of them); any other tool is counted as "other".
	Tools []string
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout (on top of MaxWait)
	// and IdleTimeout bound connections.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// Logger receives one line per request (method, route, status,
	// tenant, duration; never bodies); nil discards.
	Logger *slog.Logger
	// Registry receives the metrics; nil makes a new one. /metrics serves
	// it.
	Registry *prometheus.Registry
}

// MaxToolLabels bounds the tool names metrics use as label values, so a
// huge tools file cannot make /metrics unbounded.
const MaxToolLabels = 1000

// DefaultConfig returns 127.0.0.1:8080, 4 MiB bodies, waits of up to 30 s
// and conservative timeouts.
func DefaultConfig() Config {
	return Config{
		Addr:              "127.0.0.1:8080",
		MaxBodyBytes:      4 << 20,
		MaxWait:           30 * time.Second,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}

// ErrNoAuthPublic: no API keys are configured and the address is not a
// loopback address.
var ErrNoAuthPublic = errors.New("server: no API keys configured: refusing to listen on a non-loopback address")

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	var errs []error
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		errs = append(errs, fmt.Errorf("Addr: %w", err))
	} else if len(c.Keys) == 0 && !loopback(host) {
		errs = append(errs, fmt.Errorf("%w (%q)", ErrNoAuthPublic, c.Addr))
	}
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, errors.New("MaxBodyBytes: must be at least 1024"))
	}
	if c.MaxWait < 0 {
		errs = append(errs, errors.New("MaxWait: negative"))
	}
	for _, d := range []time.Duration{c.ReadHeaderTimeout, c.ReadTimeout, c.WriteTimeout, c.IdleTimeout} {
		if d <= 0 {
			errs = append(errs, errors.New("timeouts must be positive"))
			break
		}
	}
	for h, t := range c.Keys {
		if t == "" {
			errs = append(errs, fmt.Errorf("keys[%x]: empty tenant", h[:4]))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("server config: %w", errors.Join(errs...))
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// Server serves the API. Build it with New, bind it with Listen, run it
// with Serve and stop it with Shutdown. It is safe for concurrent use.
// It starts no goroutines of its own beyond net/http's, which Shutdown
// ends.
type Server struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	metrics *metrics
	reg     *prometheus.Registry
	tools   map[string]bool
	handler http.Handler
	http    *http.Server

	mu sync.Mutex // guards ln
	ln net.Listener

	base   context.Context // every request's parent; cancelled when a shutdown gives up
	cancel context.CancelFunc
}

// New checks cfg and deps and returns a Server that is not yet listening.
func New(cfg Config, deps Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Funnel == nil || deps.Ledger == nil {
		return nil, errors.New("server: Funnel and Ledger are required")
	}
	s := &Server{cfg: cfg, deps: deps, log: cfg.Logger, reg: cfg.Registry, tools: map[string]bool{}}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.reg == nil {
		// The process's own registry: with the Go runtime's metrics
		// (go_*: heap, GC, goroutines) and the process's (process_*: RSS,
		// CPU, open files), to size memory by.
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		s.reg = reg
	}
	for _, t := range cfg.Tools {
		if len(s.tools) == MaxToolLabels {
			s.log.Warn("more tools than metric labels: the rest are counted as tool=\"other\"", "tools", len(cfg.Tools), "labels", MaxToolLabels)
			break
		}
		s.tools[t] = true
	}
	m, err := newMetrics(s.reg, deps)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.base, s.cancel = context.WithCancel(context.Background())
	s.handler = s.routes()
	s.http = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout + cfg.MaxWait,
		IdleTimeout:       cfg.IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return s.base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// route is one endpoint: the OpenAPI test walks this table.
type route struct {
	method, path string // path in OpenAPI form: /v1/records/{key}
	auth         bool
	h            func(http.ResponseWriter, *http.Request) error
}

func (s *Server) table() []route {
	return []route{
		{"POST", "/v1/check", true, s.check},
		{"POST", "/v1/complete", true, s.complete},
		{"POST", "/v1/fail", true, s.fail},
		{"POST", "/v1/renew", true, s.renew},
		{"GET", "/v1/records/{key}", true, s.getRecord},
		{"DELETE", "/v1/records/{key}", true, s.forget},
		{"GET", "/v1/workflows/{id}", true, s.workflow},
		{"GET", "/healthz", false, s.healthz},
		{"GET", "/readyz", false, s.readyz},
		{"GET", "/openapi.json", false, s.openapi},
	}
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.table() {
		mux.Handle(rt.method+" "+rt.path, s.wrap(rt))
	}
	metricsHandler := promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)})
	mux.Handle("GET /metrics", s.instrument("/metrics", metricsHandler))
	// Anything else: a problem document, not net/http's text.
	mux.Handle("/", s.wrap(route{path: "(unmatched)", h: func(w http.ResponseWriter, r *http.Request) error {
		return errNoRoute
	}}))
	return mux
}

// Handler returns the server's handler (tests drive it with httptest).
func (s *Server) Handler() http.Handler { return s.handler }

// Registry returns the registry the metrics are in.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Listen binds the address, so that a bad or busy address fails here, at
// once. Without keys it refuses an address that resolved to a
// non-loopback one.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("server: listen %s: %w", s.cfg.Addr, err)
	}
	if len(s.cfg.Keys) == 0 {
		if a, ok := ln.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
			ln.Close()
			return fmt.Errorf("%w (%s)", ErrNoAuthPublic, ln.Addr())
		}
		s.log.Warn("no API keys configured: serving without auth, on loopback only, as tenant default", "addr", ln.Addr().String())
	}
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	return nil
}

// Addr is the bound address, once Listen has succeeded.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Serve serves on the bound listener until Shutdown; it returns nil then.
func (s *Server) Serve() error {
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln == nil {
		return errors.New("server: Serve before Listen")
	}
	s.log.Info("serving", "addr", ln.Addr().String(), "auth", len(s.cfg.Keys) > 0)
	if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// Shutdown stops accepting connections and waits for requests in flight
// to finish. When ctx ends first, it cancels the requests still running
// (a waiting check answers at once) and closes their connections.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	if err != nil {
		s.cancel()
		s.http.Close()
		return fmt.Errorf("server: shutdown: %w", err)
	}
	s.cancel()
	return nil
}
