package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/client"
	"github.com/idem-dev/idem/embed"
	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/ledger/badger"
	"github.com/idem-dev/idem/ledger/postgres"
	"github.com/idem-dev/idem/server"
)

// encoder is the built-in encoder, loaded once per test binary.
func encoder(t testing.TB) *embed.USE {
	t.Helper()
	u, err := embed.SharedUSE()
	if err != nil {
		t.Fatalf("loading the built-in encoder: %v", err)
	}
	return u
}

// options vary the server a test starts.
type options struct {
	dir      string            // the Badger directory; empty: a new temp dir
	keys     map[string]string // API key → tenant; empty: no auth
	policies []funnel.Policy
	funnel   server.Checker // replaces the real funnel (fault injection)
	// wrap, when set, stands between the server and the real funnel (a
	// test observing the checks that reach it).
	wrap     func(server.Checker) server.Checker
	maxBody  int64
	lease    time.Duration
	maxLease time.Duration
	// postgresDSN, when set, puts the ledger in PostgreSQL (a schema of
	// its own) instead of Badger.
	postgresDSN string
	// schema is the PostgreSQL schema; empty: a new one.
	schema string
	// syncWrites turns Badger's sync writes on (benchmarks of the write path).
	syncWrites bool
	// logger receives the server's log lines; nil discards them.
	logger *slog.Logger
	// now, when set, is the ledger's clock (leases and retention).
	now func() time.Time
}

// env is one running server: real Badger, real encoder and
// funnel, listening on 127.0.0.1:0.
type env struct {
	t      testing.TB
	url    string
	dir    string
	srv    *server.Server
	ledger *ledger.Ledger
	schema string // the PostgreSQL schema, when the ledger is there
	stop   func() // shuts the server down and closes index and store; idempotent
}

func start(t testing.TB, o options) *env {
	t.Helper()
	dir := o.dir
	if dir == "" {
		dir = t.TempDir()
	}
	var store interface {
		ledger.Store
		Close(context.Context) error
	}
	lcfg := ledger.DefaultConfig()
	schema := ""
	if o.postgresDSN != "" {
		pcfg := postgres.DefaultConfig(o.postgresDSN)
		pcfg.Schema = fmt.Sprintf("server_%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000_000)
		if o.schema != "" {
			pcfg.Schema = o.schema
		}
		schema = pcfg.Schema
		ps, err := postgres.Open(context.Background(), pcfg)
		if err != nil {
			t.Fatal(err)
		}
		store, lcfg.Now = ps, ps.Now
	} else {
		scfg := badger.DefaultConfig(dir)
		scfg.SyncWrites = o.syncWrites // off: speed; durability is the ledger's own test
		bs, err := badger.Open(scfg)
		if err != nil {
			t.Fatal(err)
		}
		store = bs
	}
	if o.lease > 0 {
		lcfg.Lease = o.lease
	}
	if o.maxLease > 0 {
		lcfg.MaxLease = o.maxLease
	}
	if o.now != nil {
		lcfg.Now = o.now
	}
	led, err := ledger.New(store, lcfg)
	if err != nil {
		t.Fatal(err)
	}
	cn, err := canon.New(canon.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	emb := encoder(t)
	cache, err := embed.NewCache(emb, embed.DefaultCacheConfig())
	if err != nil {
		t.Fatal(err)
	}
	fcfg := funnel.DefaultConfig()
	fcfg.Policies = o.policies
	fcfg.Now = o.now
	// A budget no machine runs out of: the decisions these tests assert
	// must not depend on the machine's speed.
	fcfg.Budget = 10 * time.Minute
	f, err := funnel.New(fcfg, funnel.Deps{Canon: cn, Ledger: led, Embedder: cache, Tokenizer: emb})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Tools = []string{"send_email"}
	cfg.Logger = o.logger
	if o.maxBody > 0 {
		cfg.MaxBodyBytes = o.maxBody
	}
	if len(o.keys) > 0 {
		cfg.Keys = map[[32]byte]string{}
		for k, tenant := range o.keys {
			cfg.Keys[sha256.Sum256([]byte(k))] = tenant
		}
	}
	deps := server.Deps{
		Funnel: f, Ledger: led,
		Ready:      func(context.Context) error { return nil },
		CacheStats: func() (uint64, uint64) { s := cache.Stats(); return s.Hits, s.Misses },
		ViewStats:  f.ViewStats,
		QueueStats: f.QueueStats,
	}
	if o.funnel != nil {
		deps.Funnel = o.funnel
	}
	if o.wrap != nil {
		deps.Funnel = o.wrap(deps.Funnel)
	}
	srv, err := server.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	e := &env{t: t, url: "http://" + srv.Addr().String(), dir: dir, srv: srv, ledger: led, schema: schema}
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			// Each step has its own deadline, long enough for a loaded
			// machine: a deadline here only turns a hang into a failure
			// (Badger's close flushes its memtable; under CPU burners that
			// took past 10 s once).
			step := func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 2*time.Minute)
			}
			ctx, cancel := step()
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
			fctx, fcancel := step()
			defer fcancel()
			f.Close(fctx)
			sctx, scancel := step()
			defer scancel()
			if err := store.Close(sctx); err != nil {
				t.Errorf("closing the store: %v", err)
			}
		})
	}
	t.Cleanup(e.stop)
	return e
}

// client returns a client of e that checks every exchange against the
// OpenAPI document.
func (e *env) client(key string) *client.Client { return e.clientWith(key, nil) }

// clientWith is client with its config changed by mutate.
func (e *env) clientWith(key string, mutate func(*client.Config)) *client.Client {
	cfg := client.DefaultConfig(e.url)
	cfg.APIKey = key
	cfg.HTTPClient = &http.Client{Transport: &validating{t: e.t, next: http.DefaultTransport}, Timeout: time.Minute}
	cfg.Wait = 5 * time.Second
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := client.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// raw sends a request and returns the status, headers and body. Its
// response is checked against the OpenAPI document too.
func (e *env) raw(method, path, contentType, key string, body []byte) (int, http.Header, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	hc := &http.Client{Transport: &validating{t: e.t, next: http.DefaultTransport, responseOnly: true}, Timeout: time.Minute}
	resp, err := hc.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// problem decodes a problem document.
func problem(t testing.TB, body []byte) server.Problem {
	t.Helper()
	var p server.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("not a problem document: %v: %s", err, body)
	}
	return p
}

// The OpenAPI document, loaded once.
var (
	docOnce   sync.Once
	docRouter routers.Router
	docT      *openapi3.T
	docErr    error
)

func openAPI(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	docOnce.Do(func() {
		loader := openapi3.NewLoader()
		docT, docErr = loader.LoadFromData(server.OpenAPI)
		if docErr != nil {
			return
		}
		if docErr = docT.Validate(context.Background()); docErr != nil {
			return
		}
		docT.Servers = nil // route by path only: test servers listen on random ports
		docRouter, docErr = legacy.NewRouter(docT)
	})
	if docErr != nil {
		t.Fatalf("the OpenAPI document: %v", docErr)
	}
	return docT, docRouter
}

// validating checks every request (unless responseOnly: bad-input tests
// send invalid ones on purpose) and every response against the OpenAPI
// document: status declared, headers and body matching their schemas.
type validating struct {
	t            testing.TB
	next         http.RoundTripper
	responseOnly bool
}

func (v *validating) RoundTrip(req *http.Request) (*http.Response, error) {
	_, router := openAPI(v.t)
	var reqBody []byte
	if req.Body != nil {
		reqBody, _ = io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := v.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	if err != nil {
		return resp, err
	}
	// Route on a copy whose path the router can match (it does not
	// unescape %2F in a key).
	rreq := req.Clone(context.Background())
	rreq.URL = &url.URL{Scheme: req.URL.Scheme, Host: req.URL.Host, Path: req.URL.EscapedPath(), RawQuery: req.URL.RawQuery}
	route, params, err := router.FindRoute(rreq)
	if err != nil {
		if resp.StatusCode == http.StatusNotFound {
			return resp, nil // an unknown endpoint: not in the document, rightly
		}
		v.t.Errorf("openapi: %s %s: no route: %v", req.Method, req.URL.Path, err)
		return resp, nil
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
	rin := &openapi3filter.RequestValidationInput{Request: rreq, PathParams: params, Route: route, Options: opts}
	if !v.responseOnly && resp.StatusCode < 400 {
		rreq.Body = io.NopCloser(bytes.NewReader(reqBody))
		if err := openapi3filter.ValidateRequest(context.Background(), rin); err != nil {
			v.t.Errorf("openapi: request %s %s does not match the document: %v", req.Method, req.URL.Path, err)
		}
	}
	if resp.StatusCode == http.StatusRequestEntityTooLarge && !strings.HasPrefix(req.URL.Path, "/v1/") {
		return resp, nil
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: rin, Status: resp.StatusCode, Header: resp.Header, Options: opts}
	out.SetBodyBytes(respBody)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		v.t.Errorf("openapi: response %d to %s %s does not match the document: %v\nbody: %.300s", resp.StatusCode, req.Method, req.URL.Path, err, respBody)
	}
	return resp, nil
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
