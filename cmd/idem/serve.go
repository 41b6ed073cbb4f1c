package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/config"
	"github.com/idem-dev/idem/embed"
	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/index"
	"github.com/idem-dev/idem/judge"
	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/ledger/badger"
	"github.com/idem-dev/idem/ledger/postgres"
	"github.com/idem-dev/idem/pairscore"
	"github.com/idem-dev/idem/server"
)

func init() {
	register("serve", command{
		summary: "run the HTTP service (Badger in ./idem-data and the built-in encoder by default)",
		run:     runServe,
	})
}

const serveUsage = `usage: idem serve [--config FILE]

Runs the HTTP API until SIGINT or SIGTERM, then drains requests in flight
and closes the store. Without a config file every key has its default
(listen 127.0.0.1:8080, data_dir ./idem-data, the built-in encoder).
IDEM_CONFIG names the file when --config is not given; IDEM_<KEY>
variables override single keys (idem config env lists them).
`

// serveContext is the context serve runs in; tests replace it.
var serveContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func runServe(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { io.WriteString(stderr, serveUsage) }
	file := fs.String("config", os.Getenv("IDEM_CONFIG"), "config file (YAML)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fs.Usage()
		return 2
	}
	cfg, defs, err := loadConfig(*file)
	if err != nil {
		printConfigErrors(stderr, "idem serve", err)
		return 2
	}
	log := newLogger(cfg.Log, stderr)
	ctx, stop := serveContext()
	defer stop()
	if err := serve(ctx, cfg, defs, log, stdout); err != nil {
		log.Error("idem serve", "err", err)
		return 1
	}
	return 0
}

// serve runs the server until ctx ends.
func serve(ctx context.Context, cfg config.Config, defs []canon.Tool, log *slog.Logger, stdout io.Writer) error {
	a, err := buildApp(cfg, defs, log)
	if err != nil {
		return err
	}
	// Loading the encoder (packing its weights, timing its kernels) leaves
	// scratch behind: give it back before serving.
	debug.FreeOSMemory()
	closeApp := func() { closeWithin(log, "closing", a.Close) }
	srv, err := server.New(a.serverConfig(cfg, log), a.serverDeps())
	if err != nil {
		closeApp()
		return err
	}
	if err := srv.Listen(); err != nil {
		closeApp()
		return err
	}
	if cfg.DebugListen != "" {
		stopDebug, err := serveDebug(cfg.DebugListen, log)
		if err != nil {
			srv.Shutdown(context.Background())
			closeApp()
			return err
		}
		defer stopDebug()
	}
	where := "data in " + cfg.DataDir
	if cfg.Store.Backend == config.BackendPostgres {
		where = "ledger in PostgreSQL schema " + cfg.Postgres.Schema
	}
	fmt.Fprintf(stdout, "idem: listening on http://%s (%s, embedder %s)\n", srv.Addr(), where, cfg.Embedder.Provider)
	if cfg.DebugListen != "" {
		fmt.Fprintf(stdout, "idem: profiles on http://%s/debug/pprof/\n", cfg.DebugListen)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve() }()
	select {
	case <-ctx.Done():
		log.Info("shutting down: draining requests in flight")
		err = nil
	case err = <-errc:
		errc = nil
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.MaxWait+10*time.Second)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		log.Error("shutdown", "err", serr)
	}
	if errc != nil {
		if serr := <-errc; serr != nil && err == nil {
			err = serr
		}
	}
	closeApp()
	log.Info("stopped")
	return err
}

// loadConfig reads the config file (none: defaults), applies the
// environment, and reads the tools file it names.
func loadConfig(file string) (config.Config, []canon.Tool, error) {
	var data []byte
	if file != "" {
		var err error
		if data, err = readBounded(file, config.MaxFileBytes); err != nil {
			return config.Config{}, nil, err
		}
	}
	cfg, err := config.Load(data, os.LookupEnv)
	if err != nil {
		return cfg, nil, err
	}
	var defs []canon.Tool
	if cfg.Tools.File != "" {
		path := cfg.Tools.File
		if !filepath.IsAbs(path) && file != "" {
			path = filepath.Join(filepath.Dir(file), path)
		}
		raw, err := readBounded(path, 16<<20)
		if err != nil {
			return cfg, nil, fmt.Errorf("tools.file: %w", err)
		}
		if defs, err = canon.ParseTools(raw); err != nil {
			return cfg, nil, fmt.Errorf("tools.file %s: %w", path, err)
		}
	}
	return cfg, defs, nil
}

func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return data, nil
}

func printConfigErrors(w io.Writer, prefix string, err error) {
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	for _, e := range list {
		fmt.Fprintf(w, "%s: %s\n", prefix, strings.ReplaceAll(e.Error(), "\n", " "))
	}
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(c.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// app is what serve and check --local build from a config; Close
// releases it in reverse order.
type app struct {
	store interface {
		ledger.Store
		Close(context.Context) error
	}
	ledger   *ledger.Ledger
	cache    *embed.Cache // nil without a cache
	funnel   *funnel.Funnel
	tools    []string
	embedded bool // the built-in encoder loaded

	// What newFunnel composes a funnel of, kept so that a new set of tool
	// definitions (idem mcp's upstream listing its tools) gets a new funnel
	// over the same store and embedder.
	cfg   config.Config
	log   *slog.Logger
	emb   funnel.Embedder
	tok   funnel.Tokenizer
	judge funnel.Judge
	// scopes holds the calls of the policies' wide scopes; nil without.
	scopes *index.Flat
}

// widePolicies reports whether a policy searches a workflow or the tenant.
func widePolicies(ps []funnel.Policy) bool {
	for _, p := range ps {
		if p.Scope == funnel.ScopeWorkflow || p.Scope == funnel.ScopeTenant {
			return true
		}
	}
	return false
}

func buildApp(cfg config.Config, defs []canon.Tool, log *slog.Logger) (*app, error) {
	a := &app{tools: cfg.ToolNames(defs), cfg: cfg, log: log}
	cn, err := canon.New(cfg.Canon(defs))
	if err != nil {
		return nil, fmt.Errorf("tools: %w", err)
	}
	var emb funnel.Embedder
	var tok funnel.Tokenizer
	switch cfg.Embedder.Provider {
	case config.ProviderBuiltin:
		uc := embed.DefaultUSEConfig()
		uc.Kernel = cfg.Embedder.Kernel
		u, err := embed.NewUSE(uc)
		if err != nil {
			return nil, fmt.Errorf("loading the built-in encoder: %w", err)
		}
		log.Info("built-in encoder loaded", "kernel", u.Kernel())
		emb, tok, a.embedded = u, u, true
	case config.ProviderOpenAI:
		oc := embed.DefaultOpenAIConfig()
		oc.BaseURL, oc.Model, oc.Dimensions, oc.Timeout = cfg.Embedder.BaseURL, cfg.Embedder.Model, cfg.Embedder.Dimensions, cfg.Embedder.Timeout
		if cfg.Embedder.APIKeyEnv != "" {
			oc.APIKey = os.Getenv(cfg.Embedder.APIKeyEnv)
		}
		o, err := embed.NewOpenAI(oc)
		if err != nil {
			return nil, fmt.Errorf("embedder: %w", err)
		}
		emb = o
	}
	if emb != nil && cfg.Embedder.CacheEntries > 0 {
		cc := embed.DefaultCacheConfig()
		cc.MaxEntries = cfg.Embedder.CacheEntries
		c, err := embed.NewCache(emb, cc)
		if err != nil {
			return nil, fmt.Errorf("embedder cache: %w", err)
		}
		a.cache, emb = c, c
	}
	var jd funnel.Judge
	if cfg.Judge.Enabled {
		jc := judge.DefaultConfig()
		jc.Enabled, jc.BaseURL, jc.Model, jc.Timeout = true, cfg.Judge.BaseURL, cfg.Judge.Model, cfg.Judge.Timeout
		if cfg.Judge.APIKeyEnv != "" {
			jc.APIKey = os.Getenv(cfg.Judge.APIKeyEnv)
		}
		j, err := judge.New(jc)
		if err != nil {
			return nil, fmt.Errorf("judge: %w", err)
		}
		jd = j
	}
	lc := ledger.DefaultConfig()
	switch cfg.Store.Backend {
	case config.BackendPostgres:
		pc := postgres.DefaultConfig(cfg.Postgres.DSN)
		if cfg.Postgres.PasswordEnv != "" {
			pc.Password = os.Getenv(cfg.Postgres.PasswordEnv)
		}
		pc.Schema, pc.PoolSize, pc.StatementTimeout, pc.Logger = cfg.Postgres.Schema, int32(cfg.Postgres.PoolSize), cfg.Postgres.StatementTimeout, log
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ps, err := postgres.Open(ctx, pc)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("opening the PostgreSQL store: %w", err)
		}
		// Leases are timed by the database's clock, so replicas agree.
		a.store, lc.Now = ps, ps.Now
	default:
		if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
			return nil, fmt.Errorf("data_dir: %w", err)
		}
		sc := badger.DefaultConfig(cfg.DataDir)
		sc.SyncWrites, sc.SyncDelay, sc.GCInterval, sc.Logger = cfg.Store.SyncWrites, cfg.Store.SyncDelay, cfg.Store.GCInterval, log
		bs, err := badger.Open(sc)
		if err != nil {
			return nil, fmt.Errorf("opening the store in %s: %w", cfg.DataDir, err)
		}
		a.store = bs
	}
	lc.Lease, lc.MaxLease, lc.Retention, lc.MaxResultBytes, lc.Logger = cfg.Ledger.Lease, cfg.Ledger.MaxLease, cfg.Ledger.Retention, cfg.Ledger.MaxResultBytes, log
	if a.ledger, err = ledger.New(a.store, lc); err != nil {
		a.Close(context.Background())
		return nil, err
	}
	a.emb, a.tok, a.judge = emb, tok, jd
	if emb != nil && widePolicies(cfg.Policies) {
		ic := index.DefaultConfig()
		ic.Dim, ic.ANNMin, ic.MaxPerScope, ic.MaxVectors = emb.Dim(), cfg.Index.ANNMin, cfg.Index.MaxPerScope, cfg.Index.MaxVectors
		// Several replicas: each keeps its own index, caught up from the
		// ledger before every search.
		ic.RefreshOnSearch = cfg.Store.Backend == config.BackendPostgres
		if a.scopes, err = index.New(ic, funnel.ScopeLoader(a.ledger, cn, emb.Name(), emb.Dim())); err != nil {
			a.Close(context.Background())
			return nil, fmt.Errorf("index: %w", err)
		}
	}
	if a.funnel, err = a.newFunnel(defs); err != nil {
		a.Close(context.Background())
		return nil, err
	}
	return a, nil
}

// newFunnel returns a funnel over the app's ledger, embedder and judge
// that knows the tools defs (their schemas and annotations) besides the
// config's rules. The caller closes it.
func (a *app) newFunnel(defs []canon.Tool) (*funnel.Funnel, error) {
	cn, err := canon.New(a.cfg.Canon(defs))
	if err != nil {
		return nil, fmt.Errorf("tools: %w", err)
	}
	deps := funnel.Deps{Canon: cn, Ledger: a.ledger, Judge: a.judge}
	if a.scopes != nil {
		deps.Scopes = a.scopes
	}
	if a.emb != nil {
		deps.Embedder, deps.Tokenizer = a.emb, a.tok
		if a.cfg.Embedder.Scorer == config.ScorerPair {
			m, err := pairscore.Default()
			if err != nil {
				return nil, fmt.Errorf("embedder.scorer: %w", err)
			}
			deps.Scorer = m
		}
	}
	fc := funnel.DefaultConfig()
	fc.Budget, fc.MaxWait, fc.Policies, fc.Logger = a.cfg.Budget, a.cfg.MaxWait, a.cfg.Policies, a.log
	fc.Tools = a.cfg.FunnelTools(defs)
	fc.EncoderBatch, fc.EncoderQueue, fc.BackgroundQueue, fc.EncoderWorkers = a.cfg.Embedder.Batch, a.cfg.Embedder.Queue, a.cfg.Embedder.BackgroundQueue, a.cfg.Embedder.Workers
	fc.MaxSessions, fc.MaxViewBytes, fc.WarmSessions = a.cfg.Sessions.MaxViews, a.cfg.Sessions.MaxViewBytes, a.cfg.Sessions.Warm
	if fc.JudgeReserve >= fc.Budget {
		fc.JudgeReserve = fc.Budget / 10
	}
	return funnel.New(fc, deps)
}

// Close stops the funnel's background work, then closes the store.
func (a *app) Close(ctx context.Context) error {
	var errs []error
	if a.funnel != nil {
		errs = append(errs, a.funnel.Close(ctx))
	}
	if a.scopes != nil {
		errs = append(errs, a.scopes.Close(ctx))
	}
	if a.store != nil {
		errs = append(errs, a.store.Close(ctx))
	}
	return errors.Join(errs...)
}

func (a *app) serverConfig(cfg config.Config, log *slog.Logger) server.Config {
	sc := server.DefaultConfig()
	sc.Addr, sc.Keys, sc.MaxBodyBytes, sc.MaxWait = cfg.Listen, cfg.TenantKeys(), cfg.Limits.MaxBodyBytes, cfg.MaxWait
	sc.Tools, sc.Logger = a.tools, log
	return sc
}

func (a *app) serverDeps() server.Deps {
	d := server.Deps{Funnel: a.funnel, Ledger: a.ledger, Ready: a.ready, ViewStats: a.funnel.ViewStats, QueueStats: a.funnel.QueueStats}
	if a.cache != nil {
		d.CacheStats = func() (uint64, uint64) { s := a.cache.Stats(); return s.Hits, s.Misses }
	}
	if s, ok := a.store.(interface {
		SyncStats() (ledger.SyncStats, bool)
	}); ok {
		if _, on := s.SyncStats(); on {
			d.SyncStats = func() ledger.SyncStats { st, _ := s.SyncStats(); return st }
		}
	}
	return d
}

// ready reads a key no one writes: the store answers ErrNotFound when it
// is open.
func (a *app) ready(ctx context.Context) error {
	_, err := a.ledger.Get(ctx, "idem", "readyz")
	if errors.Is(err, ledger.ErrNotFound) {
		return nil
	}
	if err == nil {
		return nil
	}
	return err
}

// closeWithin calls close with 30 s to finish, and logs its error as what.
func closeWithin(log *slog.Logger, what string, close func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := close(ctx); err != nil {
		log.Error(what, "err", err)
	}
}

// serveDebug serves net/http/pprof's handlers on addr (debug_listen, a
// loopback address) until the returned func is called.
func serveDebug(addr string, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("debug_listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("debug_listen", "err", err)
		}
	}()
	return func() { hs.Close() }, nil
}
