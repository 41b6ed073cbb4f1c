// Package config is idem's configuration file: its YAML form, its
// defaults (every key has one, so no file is needed), the environment
// variables that override single keys, and its validation, whose errors
// name the bad key and its line.
//
// The package reads nothing itself: the caller (cmd/idem) hands Load the
// file's bytes and a lookup function for the environment, and reads the
// tools file Tools.File names.
//
// Environment variables: every scalar key has one, IDEM_ followed by its
// path in upper case with dots and nesting turned into underscores:
// listen → IDEM_LISTEN, data_dir → IDEM_DATA_DIR, store.sync_writes →
// IDEM_STORE_SYNC_WRITES, limits.canon.max_depth →
// IDEM_LIMITS_CANON_MAX_DEPTH. The value is read as a YAML scalar of the
// key's type ("50ms", "true", "8080"). Lists and maps (auth.keys,
// tools.rules, policies) have none. EnvVars lists them all.
package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/embed"
	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/index"
)

// Config is the whole configuration. Start from Default. A plain value.
type Config struct {
	// Listen is the HTTP address (host:port). Without auth keys it must be
	// a loopback address.
	Listen string `yaml:"listen"`
	// DebugListen, when set, serves Go's profiles (net/http/pprof: heap,
	// CPU, goroutines) on this host:port, which must be a loopback
	// address; empty (the default): not served.
	DebugListen string `yaml:"debug_listen"`
	// DataDir holds the Badger ledger.
	DataDir  string        `yaml:"data_dir"`
	Log      Log           `yaml:"log"`
	Auth     Auth          `yaml:"auth"`
	Store    Store         `yaml:"store"`
	Postgres Postgres      `yaml:"postgres"`
	Ledger   Ledger        `yaml:"ledger"`
	Embedder Embedder      `yaml:"embedder"`
	Sessions Sessions      `yaml:"sessions"`
	Index    Index         `yaml:"index"`
	Judge    Judge         `yaml:"judge"`
	Budget   time.Duration `yaml:"budget"`
	// MaxWait bounds a check's wait_ms.
	MaxWait time.Duration `yaml:"max_wait"`
	Limits  Limits        `yaml:"limits"`
	// Typed says how identity values are compared by meaning (dates,
	// times, money, …) for every tool; tools.rules.<tool>.typed replaces
	// it for one tool.
	Typed    canon.TypedConfig `yaml:"typed"`
	Tools    Tools             `yaml:"tools"`
	Policies []funnel.Policy   `yaml:"policies"`
}

// Log configures structured logs.
type Log struct {
	Format string `yaml:"format"` // text or json
	Level  string `yaml:"level"`  // debug, info, warn or error
}

// Auth lists the API keys. With none, idem serves without auth, on a
// loopback address only, as tenant "default".
type Auth struct {
	Keys []APIKey `yaml:"keys"`
}

// APIKey maps the SHA-256 of an API key (hex) to a tenant. `idem key`
// makes one.
type APIKey struct {
	Tenant string `yaml:"tenant"`
	SHA256 string `yaml:"sha256"`
}

// The store backends.
const (
	BackendBadger   = "badger"
	BackendPostgres = "postgres"
)

// Store chooses the ledger's store and configures Badger.
type Store struct {
	// Backend is badger (one process, data in data_dir) or postgres
	// (several replicas sharing one database; see Postgres).
	Backend string `yaml:"backend"`
	// SyncWrites fsyncs every commit (a machine crash loses nothing
	// acknowledged). Badger only.
	SyncWrites bool `yaml:"sync_writes"`
	// SyncDelay, with SyncWrites, is how long a sync round waits for more
	// writes to join it before it fsyncs, when more than one session is
	// writing (as PostgreSQL's commit_delay and commit_siblings): fewer
	// fsyncs, each costing CPU, at up to this much more latency each. 0:
	// no wait. Badger only.
	SyncDelay  time.Duration `yaml:"sync_delay"`
	GCInterval time.Duration `yaml:"gc_interval"`
}

// Postgres configures the PostgreSQL store (store.backend: postgres).
type Postgres struct {
	// DSN locates the database, without the password.
	DSN string `yaml:"dsn"`
	// PasswordEnv names the environment variable holding the password.
	PasswordEnv string `yaml:"password_env"`
	// Schema holds idem's tables; idem creates and migrates it.
	Schema           string        `yaml:"schema"`
	PoolSize         int           `yaml:"pool_size"`
	StatementTimeout time.Duration `yaml:"statement_timeout"`
}

// Ledger configures records.
type Ledger struct {
	Lease time.Duration `yaml:"lease"`
	// MaxLease bounds how long one claim may hold its key, renewals
	// (POST /v1/renew) included.
	MaxLease       time.Duration `yaml:"max_lease"`
	Retention      time.Duration `yaml:"retention"`
	MaxResultBytes int           `yaml:"max_result_bytes"`
}

// The pair scorers.
const (
	ScorerNone = "none"
	ScorerPair = "pair"
)

// The embedder providers.
const (
	ProviderBuiltin = "builtin"
	ProviderOpenAI  = "openai"
	ProviderNone    = "none"
)

// Embedder chooses the sentence encoder.
type Embedder struct {
	// Provider is builtin (the embedded encoder), openai (an
	// OpenAI-compatible endpoint) or none (no semantic stage beyond
	// identity equality).
	Provider   string `yaml:"provider"`
	BaseURL    string `yaml:"base_url"`
	Model      string `yaml:"model"`
	Dimensions int    `yaml:"dimensions"`
	// APIKeyEnv names the environment variable holding the endpoint's key.
	APIKeyEnv string        `yaml:"api_key_env"`
	Timeout   time.Duration `yaml:"timeout"`
	// CacheEntries bounds the embedding cache; 0 turns it off.
	CacheEntries int `yaml:"cache_entries"`
	// The encoder queue (see funnel.Config): Batch texts per model call,
	// Queue texts of checks waiting (past it a check is told at once it
	// cannot compare), BackgroundQueue texts of claimed calls waiting to
	// be embedded, Workers model calls at once.
	Batch           int `yaml:"batch"`
	Queue           int `yaml:"queue"`
	BackgroundQueue int `yaml:"background_queue"`
	Workers         int `yaml:"workers"`
	// Scorer is none (text candidates are decided by the cosine) or pair
	// (the pair scorer's probability, with the built-in encoder only: the
	// policies' duplicate_probability and ambiguous_probability apply).
	Scorer string `yaml:"scorer"`
	// Kernel is the built-in encoder's matrix kernel: auto (the fastest on
	// this CPU, measured at start) or one of embed.KernelNames(). All give
	// the same vectors.
	Kernel string `yaml:"kernel"`
}

// Index sizes the index of the policies' wide scopes (scope: workflow or
// tenant): a scope's calls of one tool with equal identity fields are
// scanned exactly below ANNMin and searched through an HNSW graph above
// it; past MaxPerScope calls a scope drops its oldest, past MaxVectors
// (about 4 KB each with their graph) the least recently used scopes are
// dropped and rebuilt from the ledger when next used.
type Index struct {
	ANNMin      int `yaml:"ann_min"`
	MaxPerScope int `yaml:"max_per_scope"`
	MaxVectors  int `yaml:"max_vectors"`
}

// Sessions bounds the session views the funnel keeps in memory.
type Sessions struct {
	// MaxViews bounds the sessions held (least recently used dropped
	// first; a dropped one is loaded again from the ledger).
	MaxViews int `yaml:"max_views"`
	// MaxViewBytes bounds the views' memory in all, as estimated per
	// call (least recently used dropped first; the view a check uses is
	// kept even when it alone is larger).
	MaxViewBytes int64 `yaml:"max_view_bytes"`
	// Warm is how many of the most recently active sessions are loaded
	// from the ledger at start.
	Warm int `yaml:"warm"`
}

// Judge configures the LLM judge (off by default).
type Judge struct {
	Enabled   bool          `yaml:"enabled"`
	BaseURL   string        `yaml:"base_url"`
	Model     string        `yaml:"model"`
	APIKeyEnv string        `yaml:"api_key_env"`
	Timeout   time.Duration `yaml:"timeout"`
}

// Limits bound requests.
type Limits struct {
	// MaxBodyBytes bounds an HTTP request body.
	MaxBodyBytes int64       `yaml:"max_body_bytes"`
	Canon        CanonLimits `yaml:"canon"`
}

// CanonLimits bound a call's arguments (see canon.Config).
type CanonLimits struct {
	MaxBytes       int `yaml:"max_bytes"`
	MaxDepth       int `yaml:"max_depth"`
	MaxLeaves      int `yaml:"max_leaves"`
	MaxStringBytes int `yaml:"max_string_bytes"`
	MaxTextView    int `yaml:"max_text_view"`
}

// Tools says what idem knows of the agent's tools.
type Tools struct {
	// File is a JSON array of tool definitions (OpenAI function tools or
	// MCP tools): their schemas class fields, their annotations match
	// policies. Relative to the working directory.
	File string `yaml:"file"`
	// Rules are per-tool field rules, by exact tool name; they add to (and
	// for the same field, override) what the file's schema says.
	Rules map[string]ToolRule `yaml:"rules"`
}

// ToolRule is what the config says of one tool.
type ToolRule struct {
	// Fields maps a path pattern ("amount", "items[].note") to a rule.
	Fields    map[string]FieldRule `yaml:"fields"`
	Normalize canon.Normalize      `yaml:"normalize"`
	// Typed, when set, replaces the top-level typed settings for this tool.
	Typed *canon.TypedConfig `yaml:"typed"`
	// ReadOnly, Destructive, Idempotent set the tool's MCP annotations
	// (overriding the file's), for policy matching.
	ReadOnly    *bool `yaml:"read_only"`
	Destructive *bool `yaml:"destructive"`
	Idempotent  *bool `yaml:"idempotent"`
}

// FieldRule classes one field (see canon.FieldRule).
type FieldRule struct {
	// Class is identity, text or ignored; empty lets the schema and
	// heuristics decide.
	Class     string          `yaml:"class"`
	Normalize canon.Normalize `yaml:"normalize"`
	// Type reads the field's identity values as one type only (date, time,
	// money, country, us-state, …; string switches typing off for it).
	Type string `yaml:"type"`
	// Aliases maps an alias to what it names ("NY": "New York").
	Aliases map[string]string `yaml:"aliases"`
}

// DefaultTenant is the tenant of every request when no keys are
// configured.
const DefaultTenant = "default"

// Default returns the configuration idem runs with when given no file:
// 127.0.0.1:8080, ./idem-data, sync writes, the built-in encoder, no
// judge, a 50 ms budget and the default policies.
func Default() Config {
	cl := canon.DefaultConfig()
	lc := funnel.DefaultConfig()
	return Config{
		Listen:   "127.0.0.1:8080",
		DataDir:  "./idem-data",
		Log:      Log{Format: "text", Level: "info"},
		Store:    Store{Backend: BackendBadger, SyncWrites: true, GCInterval: 5 * time.Minute},
		Postgres: Postgres{Schema: "idem", PoolSize: 10, StatementTimeout: 5 * time.Second},
		Ledger:   Ledger{Lease: 5 * time.Minute, MaxLease: time.Hour, Retention: 24 * time.Hour, MaxResultBytes: 1 << 20},
		Embedder: Embedder{
			Provider: ProviderBuiltin, Timeout: 10 * time.Second, CacheEntries: 10_000,
			Batch: lc.EncoderBatch, Queue: lc.EncoderQueue, BackgroundQueue: lc.BackgroundQueue, Workers: lc.EncoderWorkers,
			Scorer: ScorerNone,
			Kernel: embed.KernelAuto,
		},
		Sessions: Sessions{MaxViews: lc.MaxSessions, MaxViewBytes: lc.MaxViewBytes, Warm: lc.WarmSessions},
		Index:    Index{ANNMin: index.DefaultANNMin, MaxPerScope: 100_000, MaxVectors: 400_000},
		Judge:    Judge{BaseURL: "https://api.openai.com/v1", Timeout: 2 * time.Second},
		Budget:   lc.Budget,
		MaxWait:  lc.MaxWait,
		Limits: Limits{
			MaxBodyBytes: 4 << 20,
			Canon: CanonLimits{
				MaxBytes: cl.MaxBytes, MaxDepth: cl.MaxDepth, MaxLeaves: cl.MaxLeaves,
				MaxStringBytes: cl.MaxStringBytes, MaxTextView: cl.MaxTextView,
			},
		},
		Policies: funnel.DefaultPolicies(),
	}
}

// ErrInvalid is matched by every error Load and Validate return.
var ErrInvalid = errors.New("config: invalid")

// Error is one problem with the configuration, naming the key (a path:
// "embedder.provider", "policies[1]") and, when it came from the file,
// its line; from an environment variable, the variable.
type Error struct {
	Key  string
	Line int    // 1-based; 0 when not from the file
	Env  string // the environment variable, when from one
	Msg  string
}

func (e *Error) Error() string {
	switch {
	case e.Env != "":
		return fmt.Sprintf("config: %s (from %s): %s", e.Key, e.Env, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("config: line %d: %s: %s", e.Line, e.Key, e.Msg)
	}
	return fmt.Sprintf("config: %s: %s", e.Key, e.Msg)
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Validate reports every problem with c, each an *Error naming the key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, &Error{Key: key, Msg: fmt.Sprintf(format, a...)})
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		bad("listen", "want host:port, got %q", c.Listen)
	} else if len(c.Auth.Keys) == 0 && !IsLoopback(host) {
		bad("listen", "%q is not a loopback address and no auth.keys are configured: add keys (idem key) or listen on 127.0.0.1", c.Listen)
	}
	if c.DebugListen != "" {
		if host, _, err := net.SplitHostPort(c.DebugListen); err != nil {
			bad("debug_listen", "want host:port, got %q", c.DebugListen)
		} else if !IsLoopback(host) {
			bad("debug_listen", "%q is not a loopback address: profiles show the process's memory, serve them on 127.0.0.1 only", c.DebugListen)
		}
	}
	if c.DataDir == "" {
		bad("data_dir", "empty")
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", "%q is not text or json", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q is not debug, info, warn or error", c.Log.Level)
	}
	seen := map[string]bool{}
	for i, k := range c.Auth.Keys {
		key := fmt.Sprintf("auth.keys[%d]", i)
		if err := CheckTenant(k.Tenant); err != nil {
			bad(key+".tenant", "%v", err)
		}
		if b, err := hex.DecodeString(k.SHA256); err != nil || len(b) != 32 {
			bad(key+".sha256", "want 64 hex digits (the SHA-256 of the key, as `idem key` prints it)")
		} else if seen[strings.ToLower(k.SHA256)] {
			bad(key+".sha256", "the same key is listed twice")
		}
		seen[strings.ToLower(k.SHA256)] = true
	}
	if c.Store.SyncDelay < 0 || c.Store.SyncDelay > 100*time.Millisecond {
		bad("store.sync_delay", "must be between 0 and 100ms")
	}
	if c.Store.GCInterval <= 0 {
		bad("store.gc_interval", "must be positive")
	}
	switch c.Store.Backend {
	case BackendBadger:
	case BackendPostgres:
		if c.Postgres.DSN == "" {
			bad("postgres.dsn", "required with store.backend postgres")
		}
		if c.Postgres.PoolSize < 1 {
			bad("postgres.pool_size", "must be at least 1")
		}
		if c.Postgres.StatementTimeout < time.Millisecond {
			bad("postgres.statement_timeout", "must be at least 1ms")
		}
		if c.Postgres.Schema == "" {
			bad("postgres.schema", "empty")
		}
	default:
		bad("store.backend", "%q is not badger or postgres", c.Store.Backend)
	}
	if c.Ledger.Lease <= 0 {
		bad("ledger.lease", "must be positive")
	}
	if c.Ledger.MaxLease < c.Ledger.Lease {
		bad("ledger.max_lease", "%v is shorter than ledger.lease (%v)", c.Ledger.MaxLease, c.Ledger.Lease)
	}
	if c.Ledger.Retention <= 0 {
		bad("ledger.retention", "must be positive")
	}
	if c.Ledger.MaxResultBytes <= 0 {
		bad("ledger.max_result_bytes", "must be positive")
	}
	e := &c.Embedder
	switch e.Provider {
	case ProviderBuiltin, ProviderNone:
	case ProviderOpenAI:
		if !httpURL(e.BaseURL) {
			bad("embedder.base_url", "%q is not an http(s) URL", e.BaseURL)
		}
		if e.Model == "" {
			bad("embedder.model", "required with provider openai")
		}
		if e.Dimensions == 0 {
			bad("embedder.dimensions", "required with provider openai (the index is sized before the first call)")
		}
	default:
		bad("embedder.provider", "%q is not builtin, openai or none", e.Provider)
	}
	if e.Dimensions < 0 {
		bad("embedder.dimensions", "negative")
	}
	if e.Timeout <= 0 {
		bad("embedder.timeout", "must be positive")
	}
	if e.CacheEntries < 0 {
		bad("embedder.cache_entries", "negative")
	}
	for _, k := range []struct {
		key string
		v   int
	}{{"embedder.batch", e.Batch}, {"embedder.queue", e.Queue}, {"embedder.background_queue", e.BackgroundQueue}, {"embedder.workers", e.Workers}, {"sessions.max_views", c.Sessions.MaxViews}} {
		if k.v < 1 {
			bad(k.key, "must be at least 1")
		}
	}
	switch e.Scorer {
	case ScorerNone:
	case ScorerPair:
		if e.Provider != ProviderBuiltin {
			bad("embedder.scorer", "pair needs provider builtin (its weights were fitted to the built-in encoder)")
		}
	default:
		bad("embedder.scorer", "%q is not none or pair", e.Scorer)
	}
	if c.Index.ANNMin < 0 {
		bad("index.ann_min", "negative")
	}
	if c.Index.MaxPerScope < 1 {
		bad("index.max_per_scope", "must be at least 1")
	}
	if c.Index.MaxVectors < c.Index.MaxPerScope {
		bad("index.max_vectors", "must be at least index.max_per_scope")
	}
	if c.Sessions.MaxViewBytes < 1 {
		bad("sessions.max_view_bytes", "must be at least 1")
	}
	if c.Sessions.Warm < 0 || c.Sessions.Warm > c.Sessions.MaxViews {
		bad("sessions.warm", "must be in [0, sessions.max_views]")
	}
	if e.Provider == ProviderBuiltin && e.Kernel != embed.KernelAuto && !slices.Contains(embed.KernelNames(), e.Kernel) {
		bad("embedder.kernel", "%q is not auto or a kernel this CPU runs (%s)", e.Kernel, strings.Join(embed.KernelNames(), ", "))
	}
	if c.Judge.Enabled {
		if !httpURL(c.Judge.BaseURL) {
			bad("judge.base_url", "%q is not an http(s) URL", c.Judge.BaseURL)
		}
		if c.Judge.Model == "" {
			bad("judge.model", "required when the judge is enabled")
		}
	}
	if c.Judge.Timeout <= 0 {
		bad("judge.timeout", "must be positive")
	}
	if c.Budget <= 0 {
		bad("budget", "must be positive")
	}
	if c.MaxWait < 0 {
		bad("max_wait", "negative")
	}
	if c.Limits.MaxBodyBytes < 1024 {
		bad("limits.max_body_bytes", "must be at least 1024")
	}
	cl := c.Limits.Canon
	for _, f := range []struct {
		key string
		v   int
	}{
		{"max_bytes", cl.MaxBytes}, {"max_depth", cl.MaxDepth}, {"max_leaves", cl.MaxLeaves},
		{"max_string_bytes", cl.MaxStringBytes}, {"max_text_view", cl.MaxTextView},
	} {
		if f.v <= 0 {
			bad("limits.canon."+f.key, "must be positive")
		}
	}
	if cl.MaxDepth > 10_000 {
		bad("limits.canon.max_depth", "at most 10000")
	}
	if int64(cl.MaxBytes) > c.Limits.MaxBodyBytes {
		bad("limits.canon.max_bytes", "larger than limits.max_body_bytes (%d): no request could carry such arguments", c.Limits.MaxBodyBytes)
	}
	for name, r := range c.Tools.Rules {
		for pat, f := range r.Fields {
			if f.Class != "" {
				if _, err := canon.ParseClass(f.Class); err != nil {
					bad("tools.rules."+name+".fields."+pat+".class", "%q is not identity, text or ignored", f.Class)
				}
			}
		}
		cc := canon.DefaultConfig()
		cc.Tools = map[string]canon.ToolConfig{name: r.canon(nil)}
		if err := cc.Validate(); err != nil {
			bad("tools.rules."+name, "%s", strings.TrimPrefix(err.Error(), "canon: "))
		}
	}
	tc := canon.DefaultConfig()
	tc.Typed = c.Typed
	if err := tc.Validate(); err != nil {
		bad("typed", "%s", strings.TrimPrefix(err.Error(), "canon config: "))
	}
	if len(c.Policies) == 0 {
		bad("policies", "empty: omit the key for the default policies")
	}
	names := map[string]bool{}
	for i, p := range c.Policies {
		key := fmt.Sprintf("policies[%d]", i)
		if err := p.Validate(); err != nil {
			bad(key, "%s", strings.ReplaceAll(err.Error(), "\n", "; "))
		}
		if names[p.Name] {
			bad(key+".name", "%q defined twice", p.Name)
		}
		if p.Lease > c.Ledger.MaxLease {
			bad(key+".lease", "%v is longer than ledger.max_lease (%v)", p.Lease, c.Ledger.MaxLease)
		}
		names[p.Name] = true
	}
	return errors.Join(errs...)
}

// CheckTenant reports whether t can name a tenant.
func CheckTenant(t string) error {
	switch {
	case t == "":
		return errors.New("empty")
	case len(t) > 256:
		return errors.New("longer than 256 bytes")
	case !utf8.ValidString(t) || strings.ContainsRune(t, 0):
		return errors.New("not valid UTF-8 text")
	}
	return nil
}

// IsLoopback reports whether host (from host:port) is a loopback address
// or "localhost". An empty host (all interfaces) is not.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// Canon returns the canonicalizer's configuration: the limits, the
// schemas of defs (read from Tools.File) and the inline rules.
func (c *Config) Canon(defs []canon.Tool) canon.Config {
	cc := canon.DefaultConfig()
	l := c.Limits.Canon
	cc.MaxBytes, cc.MaxDepth, cc.MaxLeaves = l.MaxBytes, l.MaxDepth, l.MaxLeaves
	cc.MaxStringBytes, cc.MaxTextView = l.MaxStringBytes, l.MaxTextView
	cc.Typed = c.Typed
	cc.Tools = map[string]canon.ToolConfig{}
	for _, d := range defs {
		cc.Tools[d.Name] = canon.ToolConfig{Schema: d.Schema}
	}
	for name, r := range c.Tools.Rules {
		cc.Tools[name] = r.canon(cc.Tools[name].Schema)
	}
	return cc
}

func (r ToolRule) canon(schema []byte) canon.ToolConfig {
	tc := canon.ToolConfig{Schema: schema, Normalize: r.Normalize, Typed: r.Typed}
	if len(r.Fields) > 0 {
		tc.Fields = make(map[string]canon.FieldRule, len(r.Fields))
		for pat, f := range r.Fields {
			cls, _ := canon.ParseClass(f.Class) // checked by Validate; "" is unset
			tc.Fields[pat] = canon.FieldRule{Class: cls, Normalize: f.Normalize, Type: f.Type, Aliases: f.Aliases}
		}
	}
	return tc
}

// FunnelTools returns what the funnel knows of each tool: defs'
// annotations and schemas, overridden by the inline rules' annotations.
func (c *Config) FunnelTools(defs []canon.Tool) map[string]funnel.ToolInfo {
	out := map[string]funnel.ToolInfo{}
	for _, d := range defs {
		out[d.Name] = funnel.ToolInfo{ReadOnly: d.ReadOnly, Destructive: d.Destructive, Idempotent: d.Idempotent, Schema: d.Schema}
	}
	for name, r := range c.Tools.Rules {
		ti := out[name]
		if r.ReadOnly != nil {
			ti.ReadOnly = r.ReadOnly
		}
		if r.Destructive != nil {
			ti.Destructive = r.Destructive
		}
		if r.Idempotent != nil {
			ti.Idempotent = r.Idempotent
		}
		out[name] = ti
	}
	return out
}

// ToolNames lists the tools the config names, sorted: those of the tools
// file (defs), of tools.rules, and those a policy names exactly (a glob
// such as "send_*" names none). They are the only tool names metrics use
// as label values; any other tool is counted as "other".
func (c *Config) ToolNames(defs []canon.Tool) []string {
	seen := map[string]bool{}
	for _, d := range defs {
		seen[d.Name] = true
	}
	for name := range c.Tools.Rules {
		seen[name] = true
	}
	for _, p := range c.Policies {
		for _, g := range p.Tools {
			if !strings.ContainsAny(g, `*?[\`) {
				seen[g] = true
			}
		}
	}
	delete(seen, "")
	return slices.Sorted(maps.Keys(seen))
}

// TenantKeys returns the tenant of each key's SHA-256. Call it on a
// valid Config.
func (c *Config) TenantKeys() map[[32]byte]string {
	out := make(map[[32]byte]string, len(c.Auth.Keys))
	for _, k := range c.Auth.Keys {
		var h [32]byte
		if b, err := hex.DecodeString(k.SHA256); err == nil && len(b) == 32 {
			copy(h[:], b)
			out[h] = k.Tenant
		}
	}
	return out
}
