package bench

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/ledger/badger"
)

// Encoder is the embedding model a replay uses: it embeds and counts
// tokens (*embed.USE provides it).
type Encoder interface {
	funnel.Embedder
	funnel.Tokenizer
}

// Checker is one engine a replay talks to: the in-process funnel, or a
// server (see ServerChecker). It is used by one goroutine at a time.
type Checker interface {
	Check(ctx context.Context, e *Event) (Decision, error)
	Complete(ctx context.Context, tenant, key, token string, result json.RawMessage) error
	Fail(ctx context.Context, tenant, key, token string, errJSON json.RawMessage, transient bool) error
	// SetNow moves the engine's virtual clock to ms after the replay's
	// start; engines on the real clock ignore it.
	SetNow(ms int64)
}

// Config configures a replay. Start from DefaultConfig.
type Config struct {
	// Policies are the funnel's action types; empty means
	// funnel.DefaultPolicies().
	Policies []funnel.Policy
	// Budget is the funnel's time budget.
	Budget time.Duration
	// RealTime replays at the speed of t_ms instead of in virtual time.
	RealTime bool
	// BaselineThreshold is the baseline's single cosine threshold.
	BaselineThreshold float64
	// Progress, when set, is called after each event.
	Progress func(done, total int)
	// Logger receives the funnel's decision lines; nil discards them.
	Logger *slog.Logger
	// Canon, when set, builds the canonicalizer's configuration from the
	// set's tool definitions (cmd/idem passes the config file's: typed
	// comparison, field rules, limits); nil uses the defaults and the
	// tools' schemas.
	Canon func(tools []canon.Tool) canon.Config
	// Scorer, when set, is the funnel's pair scorer (the policies'
	// duplicate_probability and ambiguous_probability then apply).
	Scorer funnel.Scorer
}

// DefaultConfig returns funnel.DefaultPolicies(), the 50 ms budget,
// virtual time and a baseline threshold of 0.9 (the funnel's default
// duplicate threshold).
func DefaultConfig() Config {
	return Config{
		Policies:          funnel.DefaultPolicies(),
		Budget:            50 * time.Millisecond,
		BaselineThreshold: 0.9,
	}
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	var errs []error
	if c.Budget <= 0 {
		errs = append(errs, errors.New("budget: must be positive"))
	}
	if c.BaselineThreshold <= 0 || c.BaselineThreshold > 1 {
		errs = append(errs, fmt.Errorf("baseline_threshold: %v not in (0, 1]", c.BaselineThreshold))
	}
	for _, p := range c.Policies {
		if err := p.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("bench config: %w", errors.Join(errs...))
	}
	return nil
}

// Decision is what the engine answered for one event.
type Decision struct {
	Line       int              `json:"line"`
	Decision   string           `json:"decision"`
	Stage      string           `json:"stage"`
	Policy     string           `json:"policy"`
	Key        string           `json:"key"`
	Token      string           `json:"-"`
	Similarity float64          `json:"similarity,omitempty"`
	MatchKey   string           `json:"match_key,omitempty"`
	Budget     bool             `json:"budget_exceeded,omitempty"`
	TimingsUS  map[string]int64 `json:"timings_us,omitempty"`
	Err        string           `json:"error,omitempty"`
}

// Flagged reports whether the decision stops the event (anything but
// execute). An error is not a decision and flags nothing.
func (d *Decision) Flagged() bool { return d.Err == "" && d.Decision != "execute" }

// Run is a replayed traffic set: the events and the decisions, in order.
type Run struct {
	Set       *Set
	Decisions []Decision
	// FailedAt is, for each executed event whose outcome is a failure,
	// the virtual ms at which the failure was reported (-1 otherwise).
	FailedAt []int64
	// Policies in effect.
	Policies []funnel.Policy
	Config   Config
	// vectors embedded during the replay, by text.
	vecs map[string][]float32
}

// recorder remembers every vector the funnel embeds, so the analysis does
// not embed the same text twice; it adds nothing to the funnel's timings.
type recorder struct {
	Encoder
	mu   sync.Mutex // guards vecs
	vecs map[string][]float32
}

func (r *recorder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	v, err := r.Encoder.Embed(ctx, texts)
	if err == nil && len(v) == len(texts) {
		r.mu.Lock()
		for i, t := range texts {
			r.vecs[t] = v[i]
		}
		r.mu.Unlock()
	}
	return v, err
}

// vclock is the virtual clock; safe for concurrent use.
type vclock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

func (c *vclock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *vclock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// Local is the in-process engine: the real funnel on a Badger ledger in
// a temporary directory. Close removes the directory.
type Local struct {
	f      *funnel.Funnel
	ledger *ledger.Ledger
	store  *badger.Store
	clock  *vclock
	start  time.Time // virtual time zero: the real time the engine was built (stores expire records by the wall clock)
	real   bool
	dir    string
	canon  *canon.Canonicalizer
	rec    *recorder
}

// ToolConfig turns tool definitions into the canon and funnel settings.
func ToolConfig(tools []canon.Tool) (map[string]canon.ToolConfig, map[string]funnel.ToolInfo) {
	cc := make(map[string]canon.ToolConfig, len(tools))
	fc := make(map[string]funnel.ToolInfo, len(tools))
	for _, t := range tools {
		cc[t.Name] = canon.ToolConfig{Schema: t.Schema}
		fc[t.Name] = funnel.ToolInfo{ReadOnly: t.ReadOnly, Destructive: t.Destructive, Idempotent: t.Idempotent, Schema: t.Schema}
	}
	return cc, fc
}

// NewLocal builds the in-process engine for set.
func NewLocal(cfg Config, enc Encoder, set *Set) (*Local, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "idem-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: temp dir: %w", err)
	}
	start := time.Now()
	l := &Local{clock: &vclock{t: start}, start: start, real: cfg.RealTime, dir: dir}
	ok := false
	defer func() {
		if !ok {
			l.Close(context.Background())
		}
	}()
	scfg := badger.DefaultConfig(dir)
	scfg.SyncWrites = false // a throwaway ledger; durability is not measured here
	if l.store, err = badger.Open(scfg); err != nil {
		return nil, err
	}
	now := l.clock.Now
	if cfg.RealTime {
		now = time.Now
	}
	lcfg := ledger.DefaultConfig()
	lcfg.Now = now
	if l.ledger, err = ledger.New(l.store, lcfg); err != nil {
		return nil, err
	}
	ccfg := canon.DefaultConfig()
	var infos map[string]funnel.ToolInfo
	ccfg.Tools, infos = ToolConfig(set.Tools)
	if cfg.Canon != nil {
		ccfg = cfg.Canon(set.Tools)
	}
	if l.canon, err = canon.New(ccfg); err != nil {
		return nil, err
	}
	l.rec = &recorder{Encoder: enc, vecs: map[string][]float32{}}
	fcfg := funnel.DefaultConfig()
	fcfg.Budget = cfg.Budget
	if fcfg.JudgeReserve >= fcfg.Budget {
		fcfg.JudgeReserve = fcfg.Budget / 10
	}
	fcfg.Policies = cfg.Policies
	fcfg.Tools = infos
	fcfg.Logger = cfg.Logger
	fcfg.Now = now
	if l.f, err = funnel.New(fcfg, funnel.Deps{Canon: l.canon, Ledger: l.ledger, Embedder: l.rec, Tokenizer: enc, Scorer: cfg.Scorer}); err != nil {
		return nil, err
	}
	ok = true
	return l, nil
}

// Close releases the store and removes its directory.
func (l *Local) Close(ctx context.Context) error {
	var errs []error
	if l.f != nil {
		errs = append(errs, l.f.Close(ctx))
	}
	if l.store != nil {
		errs = append(errs, l.store.Close(ctx))
	}
	errs = append(errs, os.RemoveAll(l.dir))
	return errors.Join(errs...)
}

// SetNow moves the virtual clock.
func (l *Local) SetNow(ms int64) {
	if !l.real {
		l.clock.Set(l.start.Add(time.Duration(ms) * time.Millisecond))
	}
}

// Check asks the funnel about e.
func (l *Local) Check(ctx context.Context, e *Event) (Decision, error) {
	res, err := l.f.Check(ctx, requestOf(e))
	if err != nil {
		return Decision{}, err
	}
	// What the funnel embeds in the background (the call just claimed) is
	// done before the next event, as it is when calls are not made within
	// milliseconds of each other: a replay decides the same on any machine.
	if err := l.f.Settle(ctx); err != nil {
		return Decision{}, err
	}
	d := Decision{
		Decision: string(res.Decision), Stage: string(res.Stage), Policy: res.Policy,
		Key: res.Key, Token: res.Token, Budget: res.BudgetExceeded, TimingsUS: res.TimingsUS,
	}
	if res.Match != nil {
		d.Similarity, d.MatchKey = res.Match.Similarity, res.Match.Key
	}
	return d, nil
}

// Complete reports a success.
func (l *Local) Complete(ctx context.Context, tenant, key, token string, result json.RawMessage) error {
	_, err := l.ledger.Complete(ctx, tenant, key, token, result)
	return err
}

// Fail reports a failure.
func (l *Local) Fail(ctx context.Context, tenant, key, token string, errJSON json.RawMessage, transient bool) error {
	class := ledger.ClassPermanent
	if transient {
		class = ledger.ClassTransient
	}
	_, err := l.ledger.Fail(ctx, tenant, key, token, errJSON, class)
	return err
}

func requestOf(e *Event) funnel.Request {
	return funnel.Request{
		Tenant: e.Tenant, Session: e.Session, Workflow: e.Workflow, Step: e.Step, Key: e.Key,
		Tool: e.Tool, Arguments: e.Arguments, Today: e.Today,
		Attempt: funnel.Attempt{Kind: funnel.AttemptKind(e.Attempt.Kind), Number: e.Attempt.Number},
	}
}

// report is an outcome due to be reported.
type report struct {
	due   int64
	event int
	key   string
	token string
}

type reports []report

func (r reports) Len() int { return len(r) }
func (r reports) Less(i, j int) bool {
	if r[i].due != r[j].due {
		return r[i].due < r[j].due
	}
	return r[i].event < r[j].event
}
func (r reports) Swap(i, j int) { r[i], r[j] = r[j], r[i] }
func (r *reports) Push(x any)   { *r = append(*r, x.(report)) }
func (r *reports) Pop() any {
	old := *r
	x := old[len(old)-1]
	*r = old[:len(old)-1]
	return x
}

// Replay replays set through the in-process funnel.
func Replay(ctx context.Context, cfg Config, enc Encoder, set *Set) (*Run, error) {
	if len(cfg.Policies) == 0 {
		cfg.Policies = funnel.DefaultPolicies()
	}
	l, err := NewLocal(cfg, enc, set)
	if err != nil {
		return nil, err
	}
	defer l.Close(context.Background())
	run, err := ReplayWith(ctx, cfg, l, set)
	if err != nil {
		return nil, err
	}
	run.vecs = l.rec.vecs
	return run, nil
}

// ReplayWith replays set through checker: events in order at their t_ms
// (virtual or real time), each executed event's outcome reported at
// t_ms + after_ms. A check error (bad input) is recorded on the event and
// the replay goes on; a failing outcome report ends it.
func ReplayWith(ctx context.Context, cfg Config, c Checker, set *Set) (*Run, error) {
	run := &Run{
		Set: set, Decisions: make([]Decision, len(set.Events)), FailedAt: make([]int64, len(set.Events)),
		Policies: cfg.Policies, Config: cfg,
	}
	start := time.Now()
	at := func(ms int64) error {
		if cfg.RealTime {
			d := time.Until(start.Add(time.Duration(ms) * time.Millisecond))
			if d > 0 {
				t := time.NewTimer(d)
				defer t.Stop()
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-t.C:
				}
			}
			return nil
		}
		c.SetNow(ms)
		return ctx.Err()
	}
	var due reports
	flush := func(upto int64) error {
		for len(due) > 0 && due[0].due <= upto {
			r := heap.Pop(&due).(report)
			if err := at(r.due); err != nil {
				return err
			}
			e := &set.Events[r.event]
			o := e.Outcome
			var err error
			if o == nil || o.Status == "success" {
				res := json.RawMessage(`{}`)
				if o != nil && len(o.Result) > 0 {
					res = o.Result
				}
				err = c.Complete(ctx, e.Tenant, r.key, r.token, res)
			} else {
				ej := json.RawMessage(`{"error":"failed"}`)
				if len(o.Error) > 0 {
					ej = o.Error
				}
				err = c.Fail(ctx, e.Tenant, r.key, r.token, ej, o.Transient)
				run.FailedAt[r.event] = r.due
			}
			if err != nil {
				return fmt.Errorf("bench: report outcome of line %d: %w", e.Line, err)
			}
		}
		return nil
	}
	for i := range set.Events {
		run.FailedAt[i] = -1
	}
	for i := range set.Events {
		e := &set.Events[i]
		if err := flush(e.TMS); err != nil {
			return nil, err
		}
		if err := at(e.TMS); err != nil {
			return nil, err
		}
		d, err := c.Check(ctx, e)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			d = Decision{Err: err.Error()}
		}
		d.Line = e.Line
		run.Decisions[i] = d
		if d.Err == "" && d.Decision == "execute" && (e.Outcome == nil || e.Outcome.Status != "timeout") {
			after := int64(0)
			if e.Outcome != nil {
				after = e.Outcome.AfterMS
			}
			heap.Push(&due, report{due: e.TMS + after, event: i, key: d.Key, token: d.Token})
		}
		if cfg.Progress != nil {
			cfg.Progress(i+1, len(set.Events))
		}
	}
	return run, nil
}
