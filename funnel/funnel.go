// Package funnel decides, for one tool call, whether it may execute or
// repeats an effect already recorded: execute, duplicate, in_progress,
// confirm or uncertain, within a time budget, and says why.
//
// A check runs these stages in order, each able to decide:
//
//  1. canon: the call is canonicalized (canonical bytes, hash, identity
//     digest, text view).
//  2. key (key.go): the call's own ledger key (explicit, or
//     workflow:step:tool; a sampling retry gets a derived key). A record
//     there decides: SUCCESS replays, a live PENDING is in progress, an
//     expired one is uncertain, a permanent failure replays its error, a
//     transient one runs again.
//  3. exact (exact.go): the same tool and canonical hash among the
//     session's records, found by hash.
//  4. semantic (semantic.go): the session's calls of the same tool whose
//     identity fields equal the call's (the identity gate), found by hash.
//     With none, the call decides here without being embedded. A call
//     without text fields is decided by identity equality alone; a call
//     with text is embedded (through the encoder queue, encoder.go) and
//     compared window by window with each candidate's embedding.
//  5. judge (judge.go): a candidate in the ambiguous band goes to the
//     judge; on error or timeout the policy's fallback decides.
//  6. policy (policy.go): what a semantic or judged duplicate becomes
//     (replay, confirm, warn) is the action type's.
//  7. claim (claim.go): an execute claims the key in the ledger (the store
//     decides races), comparing the call first with calls claimed in the
//     session since it looked, and returns the lease token. A claimed call
//     with text is embedded after its claim, off the request path, and its
//     embedding written to its record (vectors.go), so the next check
//     compares against it.
//
// Nothing is skipped silently. When a candidate that passed the identity
// gate could not be compared (the budget ran out, the encoder queue was
// full or said it would answer too late, the encoder failed, the
// session's view was still loading), the answer says so and the policy's
// Uncompared fallback decides: confirm for writes, execute for reads, by
// default.
//
// A sampling retry is never flagged against records of its own base key,
// and failed records are never candidates (their effect did not happen).
// The budget (50 ms by default) bounds stages 3–6: past it the funnel
// decides with what it has and says so. Only a caller's explicit wait for
// an in-flight twin takes longer. The budget runs on the real clock;
// Config.Now (leases, windows) may be another.
package funnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/embed"
	"github.com/idem-dev/idem/judge"
	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/pairscore"
)

// Ledger is what the funnel needs of the idempotency ledger
// (*ledger.Ledger provides it).
type Ledger interface {
	Get(ctx context.Context, tenant, key string) (ledger.Claim, error)
	Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error)
	Takeover(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error)
	Wait(ctx context.Context, tenant, key string) (ledger.Claim, error)
	Session(ctx context.Context, tenant, session string, after uint64, limit int) ([]ledger.Record, error)
	SetEmbedding(ctx context.Context, tenant, key string, seq, hash uint64, model string, emb []float32) error
	RecentSessions(ctx context.Context, limit int) ([]ledger.SessionRef, error)
}

// Embedder turns text views into L2-normalized vectors (embed.USE,
// embed.OpenAI and embed.Cache provide it). The vectors it returns are the
// funnel's: it rounds them to half precision in place (internal/half), the
// precision the ledger stores them at.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Dim() int
	Name() string
}

// Tokenizer counts the tokens of the embedding model, whose reading is
// bounded (embed.USE reads 128). The funnel splits a longer text view into
// windows at word boundaries, embeds each, and compares calls window by
// window, rather than let the model cut the text silently.
type Tokenizer interface {
	Tokenize(text string) (embed.Tokens, error)
	MaxTokens() int
}

// Scorer scores a pair of text views: the probability that they ask for
// the same effect (*pairscore.Model provides it). It is used only with the
// encoder its weights were fitted to.
type Scorer interface {
	Score(p pairscore.Pair) pairscore.Score
	Thresholds() pairscore.Thresholds
	CosineFloor(p float64) float64
	Encoder() string
}

// Judge decides whether executing a call would repeat an earlier call's
// effect (*judge.Client provides it). An error is never a verdict.
type Judge interface {
	Compare(ctx context.Context, r judge.Request) (judge.Verdict, error)
}

// Config configures a Funnel. Start from DefaultConfig.
type Config struct {
	// Budget bounds the exact, semantic and judge stages of one check.
	Budget time.Duration
	// JudgeReserve is the part of the budget kept back from the judge for
	// the claim that follows it.
	JudgeReserve time.Duration
	// MaxWait bounds Request.Wait.
	MaxWait time.Duration
	// TopK bounds the candidates a check embeds on the spot (earlier
	// calls whose embedding is neither known nor being computed), and the
	// newest calls of the tool with other identity fields it offers the
	// judge (see unparsedOnly).
	TopK int
	// MaxSessions bounds the session views held in memory (least recently
	// used dropped first; a dropped view is loaded again from the ledger).
	MaxSessions int
	// MaxViewBytes bounds the memory of the session views in all, as
	// their entries are estimated (about 1.1 KB a call with text by the
	// built-in encoder, 0.5 KB without): past it the least recently used
	// views are dropped. The view a check uses is kept even when it alone
	// is larger.
	MaxViewBytes int64
	// WarmSessions is how many of the most recently active sessions are
	// loaded from the ledger when the funnel starts; 0 loads none ahead.
	WarmSessions int
	// EncoderBatch bounds the texts of one Embedder call.
	EncoderBatch int
	// EncoderQueue bounds the texts checks may have waiting for the
	// encoder; past it a check is told at once that it cannot compare.
	EncoderQueue int
	// BackgroundQueue bounds the texts of claimed calls waiting to be
	// embedded; past it a call is embedded when a check needs it.
	BackgroundQueue int
	// EncoderWorkers is how many Embedder calls run at once (1 suits the
	// built-in encoder, which spreads a batch over the cores itself; more
	// suit a remote endpoint).
	EncoderWorkers int
	// Policies are the action types, matched in order; the last should be
	// a catch-all. Empty means DefaultPolicies.
	Policies []Policy
	// Tools holds what is known of each tool (its MCP annotations).
	Tools map[string]ToolInfo
	// Logger receives one line per decision (keys, stages, scores; never
	// arguments or results); nil discards.
	Logger *slog.Logger
	// Now is the clock of leases and windows; nil means time.Now.
	Now func() time.Time
}

// DefaultConfig returns a 50 ms budget, 5 ms kept back from the judge,
// waits of up to 30 s, TopK 8, 10,000 session views (256 MiB of them at
// most) of which the 1,000 most recent are warmed at start, batches of up
// to 32 texts, 256 texts waiting for checks and 65,536 in the background,
// one encoder worker, and DefaultPolicies.
func DefaultConfig() Config {
	return Config{
		Budget:          50 * time.Millisecond,
		JudgeReserve:    5 * time.Millisecond,
		MaxWait:         30 * time.Second,
		TopK:            8,
		MaxSessions:     10_000,
		MaxViewBytes:    256 << 20,
		WarmSessions:    1_000,
		EncoderBatch:    32,
		EncoderQueue:    256,
		BackgroundQueue: 1 << 16,
		EncoderWorkers:  1,
		Policies:        DefaultPolicies(),
	}
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	var errs []error
	if c.Budget <= 0 {
		errs = append(errs, errors.New("budget: must be positive"))
	}
	if c.JudgeReserve < 0 || c.JudgeReserve >= c.Budget {
		errs = append(errs, errors.New("judge_reserve: must be in [0, budget)"))
	}
	if c.MaxWait < 0 {
		errs = append(errs, errors.New("max_wait: negative"))
	}
	if c.TopK < 1 {
		errs = append(errs, errors.New("top_k: must be at least 1"))
	}
	if c.MaxSessions < 1 {
		errs = append(errs, errors.New("max_sessions: must be at least 1"))
	}
	if c.MaxViewBytes < 1 {
		errs = append(errs, errors.New("max_view_bytes: must be at least 1"))
	}
	if c.WarmSessions < 0 || c.WarmSessions > c.MaxSessions {
		errs = append(errs, errors.New("warm_sessions: must be in [0, max_sessions]"))
	}
	if c.EncoderBatch < 1 || c.EncoderQueue < 1 || c.BackgroundQueue < 1 || c.EncoderWorkers < 1 {
		errs = append(errs, errors.New("encoder_batch, encoder_queue, background_queue, encoder_workers: must be at least 1"))
	}
	names := map[string]bool{}
	for _, p := range c.Policies {
		if err := p.Validate(); err != nil {
			errs = append(errs, err)
		}
		if names[p.Name] {
			errs = append(errs, fmt.Errorf("policy %q: defined twice", p.Name))
		}
		names[p.Name] = true
	}
	if len(errs) > 0 {
		return fmt.Errorf("funnel config: %w", errors.Join(errs...))
	}
	return nil
}

// Deps are the components a Funnel composes. Canon and Ledger are
// required; without an Embedder the semantic stage compares only calls
// without text (identity equality); without Judge the ambiguous band goes
// to the fallback.
type Deps struct {
	Canon    *canon.Canonicalizer
	Ledger   Ledger
	Embedder Embedder
	// Tokenizer bounds the text each embedding sees; when nil and the
	// Embedder is itself a Tokenizer, that is used.
	Tokenizer Tokenizer
	Judge     Judge
	// Scopes holds the calls of the policies' wide scopes (workflow,
	// tenant; see scopes.go); required when a policy has one.
	Scopes Searcher
	// Scorer, when set and fitted to the Embedder, scores text candidates
	// in place of the bare cosine: the policies' thresholds are then
	// probabilities (duplicate_probability, ambiguous_probability).
	Scorer Scorer
}

// Funnel decides checks. It is safe for concurrent use. It owns
// goroutines (the encoder queue's workers, the writers of embeddings, the
// loaders of session views): Close stops them.
type Funnel struct {
	cfg      Config
	canon    *canon.Canonicalizer
	ledger   Ledger
	embedder Embedder
	tok      Tokenizer
	judge    Judge
	scorer   Scorer   // nil when off
	scopes   Searcher // nil without wide scopes
	landing  landing  // wide-scope calls whose embedding is still coming
	unit     []float32
	model    string // the embedder's name ("" without one)
	dim      int
	enc      *encoderQueue // nil without an embedder
	writes   chan write    // embeddings to write to their records
	sessions *sessions
	log      *slog.Logger
	now      func() time.Time

	// Background work: ctx is cancelled by Close, which then waits for wg.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex // guards closed and the wg.Add of spawn
	closed bool
	// pending counts the embeddings in flight or waiting to be written;
	// Settle waits for it (and the encoder queue) to be empty.
	pending counter
}

// New checks cfg and deps, starts the funnel's background work and returns
// it. Close it when done.
func New(cfg Config, deps Deps) (*Funnel, error) {
	if len(cfg.Policies) == 0 {
		cfg.Policies = DefaultPolicies()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Canon == nil || deps.Ledger == nil {
		return nil, errors.New("funnel: Canon and Ledger are required")
	}
	f := &Funnel{
		cfg: cfg, canon: deps.Canon, ledger: deps.Ledger, embedder: deps.Embedder,
		judge: deps.Judge, sessions: newSessions(cfg.MaxSessions, cfg.MaxViewBytes), log: cfg.Logger, now: cfg.Now,
	}
	if e, ok := f.judge.(interface{ Enabled() bool }); ok && !e.Enabled() {
		f.judge = nil // a disabled judge is no judge: the fallback applies, quietly
	}
	if f.log == nil {
		f.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if f.now == nil {
		f.now = time.Now
	}
	for _, p := range cfg.Policies {
		if p.Scope != "" && p.Scope != ScopeSession && deps.Scopes == nil {
			return nil, fmt.Errorf("funnel: policy %q: scope %s needs Deps.Scopes", p.Name, p.Scope)
		}
	}
	f.scopes = deps.Scopes
	if deps.Embedder != nil {
		// The contrast guard's lexicon takes tens of milliseconds to read:
		// at start, not in the first comparison's budget.
		go pairscore.Warm()
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	if f.embedder != nil {
		f.model, f.dim = f.embedder.Name(), f.embedder.Dim()
		f.unit = unit(f.dim)
		f.tok = deps.Tokenizer
		if f.tok == nil {
			f.tok, _ = f.embedder.(Tokenizer)
		}
		if deps.Scorer != nil {
			if deps.Scorer.Encoder() != f.model {
				return nil, fmt.Errorf("funnel: the pair scorer was fitted to %q, not to the embedder %q", deps.Scorer.Encoder(), f.model)
			}
			f.scorer = deps.Scorer
		}
		f.enc = newEncoderQueue(f.embedder, cfg)
		for range cfg.EncoderWorkers {
			f.spawn(f.enc.work)
		}
		f.writes = make(chan write, maxPendingWrites)
		for range writers {
			f.spawn(f.writeLoop)
		}
	}
	if cfg.WarmSessions > 0 {
		f.pending.add(1)
		if !f.spawn(func(ctx context.Context) { defer f.pending.add(-1); f.warm(ctx) }) {
			f.pending.add(-1)
		}
	}
	return f, nil
}

// spawn runs fn in a goroutine of the funnel's, with the funnel's context;
// false once the funnel is closed.
func (f *Funnel) spawn(fn func(context.Context)) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		fn(f.ctx)
	}()
	return true
}

// Close stops the background work and waits for it until ctx ends.
// Embeddings not yet written are lost (the next check that needs one
// computes it again); checks still running get errors. Calling Close
// again returns nil.
func (f *Funnel) Close(ctx context.Context) error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.mu.Unlock()
	f.cancel()
	if f.enc != nil {
		f.enc.close()
	}
	done := make(chan struct{})
	go func() { f.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("funnel close: %w", ctx.Err())
	}
}

// Settle waits until the funnel's background work is done: the sessions
// being loaded are loaded, every text queued is embedded and every
// embedding written to its record. The bench
// harness calls it between the events of a replay, so that what a replay
// decides does not depend on how fast the machine embeds in the
// background.
func (f *Funnel) Settle(ctx context.Context) error {
	for {
		if f.enc != nil {
			select {
			case <-f.enc.settled():
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		select {
		case <-f.pending.zero():
		case <-ctx.Done():
			return ctx.Err()
		}
		if f.enc == nil {
			return nil
		}
		select {
		case <-f.enc.settled():
			return nil // nothing arrived while the writes ran
		default:
		}
	}
}

// Policy returns the policy that applies to tool.
func (f *Funnel) Policy(tool string) *Policy {
	info := f.cfg.Tools[tool]
	for i := range f.cfg.Policies {
		if f.cfg.Policies[i].matches(tool, info) {
			return &f.cfg.Policies[i]
		}
	}
	p := DefaultPolicy()
	return &p
}

// thresholds are the duplicate and ambiguous thresholds of pol on the
// scale of the candidates' scores: probabilities with the pair scorer,
// cosines without.
func (f *Funnel) thresholds(pol *Policy) (dup, amb float64) {
	if f.scorer == nil {
		return pol.Thresholds(nil)
	}
	t := f.scorer.Thresholds()
	return pol.Thresholds(&t)
}

// floor is the lowest cosine at which the pair scorer can reach the
// ambiguous probability: a candidate below it is not scored.
func (f *Funnel) floor(c *check) float64 { return f.scorer.CosineFloor(c.amb) }

// Scope names the index scope of a tenant's session.
func Scope(tenant, session string) string { return tenant + "\x00" + session }

// check carries one check's state through the stages.
type check struct {
	req      Request
	call     *canon.Call
	pol      *Policy
	key      string
	base     string
	scope    string
	start    time.Time
	deadline time.Time
	res      Result
	// fl is the call's own text embedding once asked for (windows once
	// it is there).
	fl      *flight
	windows [][]float32
	seenSeq uint64 // the session's newest Seq when the semantic stages looked
	// looked: the semantic stages compared the call with the session up
	// to seenSeq (false when the view could not be loaded in time).
	looked bool
	locked bool // the session's lock is held (claim's late look): no waiting
	// dup and amb are the policy's thresholds on the scale of the scores.
	dup, amb float64
	// leaves are the call's identity leaves, once grading needed them;
	// restated holds the grade of each earlier call whose identity values
	// the call restates.
	leaves   *canon.IdentityLeaves
	restated map[*entry]*canon.Comparison
	today    canon.Date // the reference date relative dates were read against, or zero
	// plainIdentity is the call's identity digest with its relative
	// dates left strings, once anotherDay needed it.
	plainIdentity uint64
	mark          time.Time
}

func (c *check) lap(stage string) {
	now := time.Now()
	c.res.TimingsUS[stage] += now.Sub(c.mark).Microseconds()
	c.mark = now
}

func (c *check) note(format string, args ...any) {
	c.res.Notes = append(c.res.Notes, fmt.Sprintf(format, args...))
}

// Check decides one call. Errors are for bad input (matching
// ErrInvalidRequest, canon's and ledger's field errors, ErrKeyReuse) and
// for a failing ledger; every decision, flagged or not, is a Result.
func (f *Funnel) Check(ctx context.Context, req Request) (Result, error) {
	start := time.Now()
	c := &check{req: req, start: start, mark: start, deadline: start.Add(f.cfg.Budget)}
	c.res.TimingsUS = make(map[string]int64, 8)
	if err := validate(&req); err != nil {
		return Result{}, err
	}
	c.today = req.Today
	if c.today.IsZero() {
		c.today = f.canon.Today(req.Tool, f.now())
	}
	call, err := f.canon.CanonicalizeOn(req.Tool, req.Arguments, c.today)
	if err != nil {
		return Result{}, err
	}
	c.call = call
	if !c.today.IsZero() {
		c.res.ReferenceDate = c.today.String()
	}
	c.res.Hash, c.res.IdentityDigest = call.Hash, call.IdentityDigest
	c.pol = f.Policy(req.Tool)
	c.res.Policy = c.pol.Name
	c.dup, c.amb = f.thresholds(c.pol)
	c.scope = Scope(req.Tenant, req.Session)
	c.lap("canon")

	if c.key, err = ledger.KeyFor(keyInput(&req, false)); err != nil {
		return Result{}, err
	}
	if c.base, err = ledger.KeyFor(keyInput(&req, true)); err != nil {
		return Result{}, err
	}
	c.res.Key = c.key

	done, err := f.keyStage(ctx, c)
	c.lap("key")
	if err != nil || done {
		return f.finish(ctx, c, err)
	}
	if c.pol.Semantic {
		done, err = f.sessionStages(ctx, c)
		if err != nil || done {
			return f.finish(ctx, c, err)
		}
		done, err = f.scopeStage(ctx, c)
		if err != nil || done {
			return f.finish(ctx, c, err)
		}
	}
	err = f.claim(ctx, c)
	return f.finish(ctx, c, err)
}

func validate(req *Request) error {
	switch {
	case req.Tenant == "":
		return fmt.Errorf("%w: tenant: empty", ErrInvalidRequest)
	case req.Session == "":
		return fmt.Errorf("%w: session_id: missing", ErrInvalidRequest)
	case req.Tool == "":
		return fmt.Errorf("%w: tool: missing", ErrInvalidRequest)
	case len(req.Arguments) == 0:
		return fmt.Errorf("%w: arguments: missing", ErrInvalidRequest)
	case req.Wait < 0:
		return fmt.Errorf("%w: wait_ms: negative", ErrInvalidRequest)
	case req.Attempt.Number < 0:
		return fmt.Errorf("%w: attempt.number: negative", ErrInvalidRequest)
	}
	switch req.Attempt.Kind {
	case "", First, Transient, Sampling:
	default:
		return fmt.Errorf("%w: attempt.kind: %q is not first, transient or sampling", ErrInvalidRequest, req.Attempt.Kind)
	}
	if req.Confirmed != "" {
		if err := ledger.CheckKey("confirmed", req.Confirmed); err != nil {
			return err
		}
	}
	return nil
}

func keyInput(req *Request, base bool) ledger.KeyInput {
	in := ledger.KeyInput{IdempotencyKey: req.Key, Workflow: req.Workflow, Step: req.Step, Tool: req.Tool}
	if !base && req.Attempt.Kind == Sampling {
		in.Sampling, in.Attempt, in.PreviousError = true, req.Attempt.Number, req.Attempt.Error
	}
	return in
}

func (f *Funnel) finish(ctx context.Context, c *check, err error) (Result, error) {
	if err != nil {
		return Result{}, err
	}
	c.res.TimingsUS["total"] = time.Since(c.start).Microseconds()
	if c.res.Decision == InProgress && c.res.Match != nil {
		c.res.LeaseExpiresAt = time.UnixMilli(c.res.Match.leaseUntil).UTC()
	}
	f.log.DebugContext(ctx, "check",
		"key", c.key, "tool", c.req.Tool, "policy", c.pol.Name,
		"decision", string(c.res.Decision), "stage", string(c.res.Stage),
		"similarity", similarity(c.res.Match), "budget_exceeded", c.res.BudgetExceeded,
		"total_us", c.res.TimingsUS["total"])
	return c.res, nil
}

func similarity(m *Match) float64 {
	if m == nil {
		return 0
	}
	return m.Similarity
}

func matchOf(r *ledger.Record, sim float64) *Match {
	m := &Match{
		Key: r.Key, Tool: r.Tool, Workflow: r.Workflow, Step: r.Step, Status: r.Status.String(),
		Result: r.Result, Error: r.Error, Similarity: sim, CreatedAt: r.CreatedAt, Session: r.Session,
		leaseUntil: r.LeaseUntil,
	}
	if r.Status == ledger.StatusFailed {
		m.ErrorClass = r.Class.String()
	}
	return m
}
