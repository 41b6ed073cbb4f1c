// Package funnel decides, for one tool call, whether it may execute or
// repeats an effect already recorded: execute, duplicate, in_progress,
// confirm or uncertain, within a time budget, and says why.
//
// A check runs these stages in order, each able to decide:
//
//  1. canon: the call is canonicalized (canonical bytes, hash, identity
//     digest, text view).
//  2. key: the call's own ledger key (explicit, or workflow:step:tool; a
//     sampling retry gets a derived key). A record there decides: SUCCESS
//     replays, a live PENDING is in progress, an expired one is uncertain,
//     a permanent failure replays its error, a transient one runs again.
//  3. exact: the same tool and canonical hash among the session's records.
//  4. semantic: the text view is embedded and the session's calls of the
//     same tool searched; a candidate counts only if its identity fields
//     equal the call's (the identity gate). A call without text fields
//     skips embedding: identity equality decides.
//  5. judge: a candidate in the ambiguous band goes to the judge; on error
//     or timeout the policy's fallback decides.
//  6. policy: what a semantic or judged duplicate becomes (replay, confirm,
//     warn) is the action type's.
//  7. claim: an execute claims the key in the ledger (the store decides
//     races), with the embedding, and returns the lease token.
//
// A sampling retry is never flagged against records of its own base key,
// and failed records are never candidates (their effect did not happen).
// The budget (50 ms by default) bounds stages 3–6: past it the funnel
// decides with what it has by the policy's fallback and says so. Only a
// caller's explicit wait for an in-flight twin takes longer.
package funnel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/embed"
	"github.com/idem-dev/idem/index"
	"github.com/idem-dev/idem/judge"
	"github.com/idem-dev/idem/ledger"
)

// Ledger is what the funnel needs of the idempotency ledger
// (*ledger.Ledger provides it).
type Ledger interface {
	Get(ctx context.Context, tenant, key string) (ledger.Claim, error)
	Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error)
	Takeover(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error)
	Wait(ctx context.Context, tenant, key string) (ledger.Claim, error)
	Session(ctx context.Context, tenant, session string, after uint64, limit int) ([]ledger.Record, error)
}

// Embedder turns text views into L2-normalized vectors (embed.USE,
// embed.OpenAI and embed.Cache provide it).
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

// Searcher finds a session's nearest calls (*index.Flat provides it).
type Searcher interface {
	Add(scope string, entries ...index.Entry) error
	Search(ctx context.Context, scope, tag string, query []float32, k int) ([]index.Hit, error)
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
	// TopK is how many nearest calls the semantic stage examines.
	TopK int
	// MaxSessions bounds the session views held in memory (least recently
	// used dropped first; a dropped view is rebuilt from the ledger).
	MaxSessions int
	// Policies are the action types, matched in order; the last should be
	// a catch-all. Empty means DefaultPolicies.
	Policies []Policy
	// Tools holds what is known of each tool (its MCP annotations).
	Tools map[string]ToolInfo
	// Logger receives one line per decision (keys, stages, scores; never
	// arguments or results); nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultConfig returns a 50 ms budget, 5 ms kept back from the judge,
// waits of up to 30 s, the 8 nearest calls examined, 10,000 session views
// and DefaultPolicies.
func DefaultConfig() Config {
	return Config{
		Budget:       50 * time.Millisecond,
		JudgeReserve: 5 * time.Millisecond,
		MaxWait:      30 * time.Second,
		TopK:         8,
		MaxSessions:  10_000,
		Policies:     DefaultPolicies(),
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
// required; without Embedder and Index the semantic stage compares only
// calls without text (identity equality); without Judge the ambiguous band
// goes to the fallback.
type Deps struct {
	Canon    *canon.Canonicalizer
	Ledger   Ledger
	Embedder Embedder
	// Tokenizer bounds the text each embedding sees; when nil and the
	// Embedder is itself a Tokenizer, that is used.
	Tokenizer Tokenizer
	Index     Searcher
	Judge     Judge
}

// Funnel decides checks. It is safe for concurrent use and owns no
// goroutines.
type Funnel struct {
	cfg      Config
	canon    *canon.Canonicalizer
	ledger   Ledger
	embedder Embedder
	tok      Tokenizer
	index    Searcher
	judge    Judge
	dim      int
	sessions *sessions
	log      *slog.Logger
	now      func() time.Time
}

// New checks cfg and deps and returns a Funnel.
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
	if (deps.Embedder == nil) != (deps.Index == nil) {
		return nil, errors.New("funnel: Embedder and Index go together")
	}
	f := &Funnel{
		cfg: cfg, canon: deps.Canon, ledger: deps.Ledger, embedder: deps.Embedder,
		index: deps.Index, judge: deps.Judge, sessions: newSessions(cfg.MaxSessions),
		log: cfg.Logger, now: cfg.Now,
	}
	if f.embedder != nil {
		f.dim = f.embedder.Dim()
		f.tok = deps.Tokenizer
		if f.tok == nil {
			f.tok, _ = f.embedder.(Tokenizer)
		}
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
	return f, nil
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
	windows  [][]float32 // the call's text embedding, once computed
	seenSeq  uint64      // the session's newest Seq when the semantic stages looked
	locked   bool        // the session's lock is held (claim's late look): no waiting, no claiming
	today    canon.Date  // the reference date relative dates were read against, or zero
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
		Result: r.Result, Error: r.Error, Similarity: sim, CreatedAt: r.CreatedAt,
		leaseUntil: r.LeaseUntil,
	}
	if r.Status == ledger.StatusFailed {
		m.ErrorClass = r.Class.String()
	}
	return m
}

// keyStage looks at the call's own key. It reports done when the record
// there decides.
func (f *Funnel) keyStage(ctx context.Context, c *check) (bool, error) {
	got, err := f.ledger.Get(ctx, c.req.Tenant, c.key)
	if errors.Is(err, ledger.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if got.Record.Hash != c.call.Hash && got.Outcome != ledger.Retryable {
		m := keyMismatchOf(c.pol, c.req.Key != "", c.call, &got.Record, func() *canon.Call { return f.earlierCall(c, &got.Record) })
		if done, err := m.apply(&c.res, c.key, matchOf(&got.Record, 1)); done || err != nil {
			return done, err
		}
	}
	if got.Outcome == ledger.InProgress && c.req.Wait > 0 {
		got, err = f.wait(ctx, c, c.key)
		if errors.Is(err, ledger.ErrNotFound) {
			return false, nil // forgotten while we waited: the call may run
		}
		if err != nil {
			return false, err
		}
	}
	return f.decideKey(ctx, c, got, true)
}

// decideKey turns what the key holds into a decision. With takeover, an
// uncertain record the request asked to take over is claimed anew; the
// claim paths pass false (they hold the session's lock, which a takeover
// takes, and a lost race is answered as it stands).
func (f *Funnel) decideKey(ctx context.Context, c *check, got ledger.Claim, takeover bool) (bool, error) {
	r := &got.Record
	if got.Outcome != ledger.Retryable {
		c.res.Stage = StageKey
	}
	switch got.Outcome {
	case ledger.Duplicate:
		c.res.Decision, c.res.Match = Duplicate, matchOf(r, 1)
		c.res.Reason = "this key already executed: its result is replayed"
	case ledger.FailedPermanent:
		c.res.Decision, c.res.Match = Duplicate, matchOf(r, 1)
		c.res.Reason = "this key already failed permanently: its error is replayed"
	case ledger.InProgress:
		c.res.Decision, c.res.Match = InProgress, matchOf(r, 1)
		c.res.Reason = "this key is being executed right now"
	case ledger.Uncertain:
		if c.req.Takeover && takeover {
			return true, f.takeover(ctx, c)
		}
		c.res.Decision, c.res.Match = Uncertain, matchOf(r, 1)
		c.res.Reason = "this key's execution lost its lease without a result: the effect may have happened"
	case ledger.Retryable:
		c.note("the previous execution under this key failed transiently; it runs again")
		return false, nil
	default:
		return false, fmt.Errorf("funnel: unexpected ledger outcome %v", got.Outcome)
	}
	return true, nil
}

// wait waits for key to leave PENDING, up to the request's bounded wait.
func (f *Funnel) wait(ctx context.Context, c *check, key string) (ledger.Claim, error) {
	d := min(c.req.Wait, f.cfg.MaxWait)
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	got, err := f.ledger.Wait(wctx, c.req.Tenant, key)
	c.lap("wait")
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		c.note("waited %v for the call in progress; it has not finished", d)
		return got, nil
	}
	return got, err
}

// candidate is an earlier call that may be the same effect.
type candidate struct {
	e     *entry
	score float64
	// got is the candidate's record, when score read it (live: it counts).
	got     ledger.Claim
	fetched bool
}

// sessionStages runs exact, semantic, judge and policy. It reports done
// when one of them decided; otherwise the call goes on to the claim.
func (f *Funnel) sessionStages(ctx context.Context, c *check) (bool, error) {
	s := f.sessions.get(c.scope)
	s.mu.Lock()
	_, err := f.refresh(ctx, s, c.req.Tenant, c.req.Session, c.scope)
	seen := s.lastSeq
	exact := slices.Clone(s.byHash[c.call.Hash])
	var noText []*entry
	if !c.call.HasText() {
		noText = slices.Clone(s.byTool[c.req.Tool])
	}
	s.mu.Unlock()
	if err != nil {
		return false, err
	}
	// Calls claimed in this session after this point are compared under
	// the lock that the claim takes (see claim and late).
	c.seenSeq = seen
	c.lap("refresh")

	if done, err := f.exactStage(ctx, c, exact); err != nil || done {
		c.lap("exact")
		return done, err
	}
	c.lap("exact")

	bctx, cancel := context.WithDeadline(ctx, c.deadline)
	defer cancel()
	var cands []candidate
	if c.call.HasText() {
		if f.embedder != nil {
			cands, err = f.semanticCandidates(bctx, c)
			if err != nil {
				if bctx.Err() != nil && ctx.Err() == nil {
					return f.fallback(ctx, c, nil, "the budget ran out while embedding")
				}
				return false, err
			}
		}
	} else {
		cands = f.identityCandidates(bctx, c, noText, true)
	}
	return f.decideCandidates(ctx, bctx, c, cands)
}

// exactStage looks for the same tool and canonical hash.
func (f *Funnel) exactStage(ctx context.Context, c *check, es []*entry) (bool, error) {
	for i := len(es) - 1; i >= 0; i-- { // newest first
		e := es[i]
		if !f.eligible(c, e) || f.anotherDay(c, e) {
			continue
		}
		got, ok, err := f.live(ctx, c, e.key)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		c.res.Stage = StageExact
		return true, f.replay(ctx, c, got, 1, "the same call (same tool and canonical arguments) was made in this session")
	}
	return false, nil
}

// anotherDay reports that an earlier call with the same canonical bytes
// read its relative dates against another day: "next Monday" said on
// March 1st and on March 8th are two bookings. It holds when this call
// read a relative date and the earlier record's identity digest is
// neither this call's nor that of the same bytes with the relative dates
// left strings (an earlier call that carried no reference date stays an
// exact duplicate: nothing says it meant another day).
func (f *Funnel) anotherDay(c *check, e *entry) bool {
	if !c.call.Relative || e.identity == c.call.IdentityDigest {
		return false
	}
	if c.plainIdentity == 0 {
		plain, err := f.canon.Canonicalize(c.req.Tool, c.req.Arguments)
		if err != nil {
			return false
		}
		c.plainIdentity = plain.IdentityDigest
	}
	return e.identity != c.plainIdentity
}

// eligible: a candidate of the same tool, not of this call's own base key,
// within the policy's window.
func (f *Funnel) eligible(c *check, e *entry) bool {
	if e.tool != c.req.Tool || e.base == c.base || e.key == c.key {
		return false
	}
	if c.pol.Window > 0 && e.createdAt < f.now().Add(-c.pol.Window).UnixMilli() {
		return false
	}
	return true
}

// live reads a candidate's record and reports whether its effect counts:
// SUCCESS, or PENDING (live or uncertain). Failed and vanished records do
// not.
func (f *Funnel) live(ctx context.Context, c *check, key string) (ledger.Claim, bool, error) {
	got, err := f.ledger.Get(ctx, c.req.Tenant, key)
	if errors.Is(err, ledger.ErrNotFound) {
		return got, false, nil
	}
	if err != nil {
		return got, false, err
	}
	switch got.Outcome {
	case ledger.Duplicate, ledger.InProgress, ledger.Uncertain:
		return got, true, nil
	}
	return got, false, nil
}

// replay answers with an earlier call's effect: its result, its being in
// progress (after the requested wait), or its uncertainty.
func (f *Funnel) replay(ctx context.Context, c *check, got ledger.Claim, sim float64, reason string) error {
	if got.Outcome == ledger.InProgress && c.req.Wait > 0 && !c.locked {
		var err error
		if got, err = f.wait(ctx, c, got.Record.Key); err != nil {
			if errors.Is(err, ledger.ErrNotFound) {
				got.Outcome = ledger.Retryable
			} else {
				return err
			}
		}
	}
	c.res.Match = matchOf(&got.Record, sim)
	switch got.Outcome {
	case ledger.Duplicate:
		c.res.Decision, c.res.Reason = Duplicate, reason+": its result is replayed"
	case ledger.InProgress:
		c.res.Decision, c.res.Reason = InProgress, reason+", and is being executed right now"
	case ledger.Uncertain:
		c.res.Decision, c.res.Reason = Uncertain, reason+", and lost its lease without a result: the effect may have happened"
	default:
		if c.locked {
			return fmt.Errorf("funnel: unexpected ledger outcome %v for a live candidate", got.Outcome)
		}
		// It failed or vanished while we waited: this call may run.
		c.res.Match, c.res.Stage = nil, ""
		c.note("a matching call failed or vanished while waiting; this call executes")
		return f.claim(ctx, c)
	}
	return nil
}

// semanticCandidates embeds the call's text view and returns the session's
// nearest calls of the same tool that pass the identity gate, best first.
func (f *Funnel) semanticCandidates(ctx context.Context, c *check) ([]candidate, error) {
	windows, err := f.embedText(ctx, c)
	if err != nil {
		return nil, err
	}
	c.windows = windows
	c.lap("embed")
	hits, err := f.index.Search(ctx, c.scope, c.req.Tool, windows[0], f.cfg.TopK)
	if err != nil {
		return nil, err
	}
	s := f.sessions.get(c.scope)
	s.mu.Lock()
	entries := make([]*entry, 0, len(hits))
	for _, h := range hits {
		if e, ok := s.byKey[h.ID]; ok {
			entries = append(entries, e)
		}
	}
	s.mu.Unlock()
	cands, err := f.score(ctx, c, entries, true)
	c.lap("search")
	return cands, err
}

// score compares the call with entries: eligibility, the identity gate and
// the window-by-window cosine, with the windows read from each candidate's
// ledger record (which also says whether its effect still counts). Best
// first. With forJudge, an entry that fails the gate only by identity
// values no typed rule read, with a similarity in the ambiguous band or
// above, stays for the judge below the duplicate threshold (see
// unparsedOnly).
func (f *Funnel) score(ctx context.Context, c *check, entries []*entry, forJudge bool) ([]candidate, error) {
	var cands []candidate
	held := 0
	judgeMaySee := forJudge && f.judge != nil && c.pol.Judge && len(c.call.UnparsedPaths()) > 0
	for _, e := range entries {
		if !f.eligible(c, e) || !e.text || e.model != f.embedder.Name() {
			continue
		}
		gated := c.pol.IdentityGate && e.identity != c.call.IdentityDigest
		if gated && !judgeMaySee {
			continue
		}
		got, ok, err := f.live(ctx, c, e.key)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		sim := f.compare(c, c.windows, windowsOf(got.Record.Embedding, f.dim))
		if gated {
			if sim < c.pol.AmbiguousThreshold || !f.unparsedOnly(ctx, c, e) {
				continue
			}
			sim = math.Min(sim, math.Nextafter(c.pol.DuplicateThreshold, 0))
			held++
		}
		cands = append(cands, candidate{e: e, score: sim, got: got, fetched: true})
	}
	f.noteHeld(c, held)
	slices.SortStableFunc(cands, func(a, b candidate) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return 0
	})
	return cands, nil
}

// compare is the cosine of two text views embedded window by window: the
// lowest over aligned windows. Views of a different number of windows
// differ in text the encoder saw in one and not the other, so they are
// held below the duplicate threshold: at most the judge may call them the
// same.
func (f *Funnel) compare(c *check, a, b [][]float32) float64 {
	n := min(len(a), len(b))
	sim := 1.0
	for i := range n {
		sim = math.Min(sim, dot(a[i], b[i]))
	}
	if len(a) != len(b) {
		sim = math.Min(sim, math.Nextafter(c.pol.DuplicateThreshold, 0))
	}
	return sim
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// identityCandidates: for a call without text, earlier calls of the same
// tool without text and with equal identity fields; after them, the
// newest TopK that differ only in identity values no typed rule read, at
// the bottom of the ambiguous band: only the judge may call them the same
// (with forJudge).
func (f *Funnel) identityCandidates(ctx context.Context, c *check, es []*entry, forJudge bool) []candidate {
	var cands, held []candidate
	for i := len(es) - 1; i >= 0; i-- {
		e := es[i]
		if !f.eligible(c, e) || e.text {
			continue
		}
		if e.identity == c.call.IdentityDigest {
			cands = append(cands, candidate{e: e, score: 1})
		} else if forJudge && len(held) < f.cfg.TopK && f.unparsedOnly(ctx, c, e) {
			held = append(held, candidate{e: e, score: c.pol.AmbiguousThreshold})
		}
	}
	f.noteHeld(c, len(held))
	return append(cands, held...)
}

// unparsedOnly reports whether the earlier call e differs from the call
// only in identity strings that no typed rule of canon read (equal
// canon.Call.TypedDigest, unequal IdentityDigest): "SF" for "San
// Francisco" is a restatement the identity gate cannot see and a
// configured judge may. Without a judge, or on any error reading e's
// record, it is false: the gate's answer stands.
func (f *Funnel) unparsedOnly(ctx context.Context, c *check, e *entry) bool {
	if f.judge == nil || !c.pol.Judge || len(c.call.UnparsedPaths()) == 0 {
		return false
	}
	got, err := f.ledger.Get(ctx, c.req.Tenant, e.key)
	if err != nil {
		return false
	}
	earlier := f.earlierCall(c, &got.Record)
	return earlier != nil && earlier.TypedDigest == c.call.TypedDigest
}

// noteHeld says how many earlier calls were kept for the judge by
// unparsedOnly, naming the fields (never their values).
func (f *Funnel) noteHeld(c *check, held int) {
	if held > 0 {
		c.note("%d earlier call(s) differ only in identity values no typed rule read (%s): held for the judge",
			held, strings.Join(c.call.UnparsedPaths(), ", "))
	}
}

// decideCandidates applies the thresholds, the judge and the policy.
func (f *Funnel) decideCandidates(ctx, bctx context.Context, c *check, cands []candidate) (bool, error) {
	var ambiguous *candidate
	for i := range cands {
		cd := &cands[i]
		if cd.score < c.pol.AmbiguousThreshold {
			break
		}
		got, ok := cd.got, cd.fetched
		if !cd.fetched {
			var err error
			if got, ok, err = f.live(ctx, c, cd.e.key); err != nil {
				return false, err
			}
		}
		if !ok {
			continue
		}
		var earlier *canon.Call // the candidate's call, read once for both uses below
		if cd.score >= c.pol.DuplicateThreshold {
			earlier = f.earlierCall(c, &got.Record)
			if kind := f.contrastWith(c, earlier); kind != "" {
				cd.score = math.Nextafter(c.pol.DuplicateThreshold, 0)
				c.note("the earlier call's text differs in %s: held below the duplicate threshold", kind)
			}
		}
		if cd.score >= c.pol.DuplicateThreshold {
			c.res.Stage = StageSemantic
			f.noteRestated(c, earlier)
			reason := fmt.Sprintf("a call of the same tool with equal identity fields and text similarity %.3f (≥ %.2f) was made in this session", cd.score, c.pol.DuplicateThreshold)
			if len(c.windows) == 0 {
				reason = "a call of the same tool with equal identity fields (and no text to compare) was made in this session"
			}
			return f.onDuplicate(ctx, c, got, cd.score, reason)
		}
		if ambiguous == nil {
			ambiguous = cd
			c.res.Match = matchOf(&got.Record, cd.score)
			if done, err := f.judgeStage(ctx, bctx, c, cd, got); err != nil || done {
				return done, err
			}
		}
	}
	return false, nil
}

// noteRestated says which identity values of the call restate the earlier
// call's in another spelling (`date: date "March 14th" = "2019-03-14"`), so
// the answer shows why the identity gate let it through. The notes hold
// argument values: they go to the caller, never to the log.
func (f *Funnel) noteRestated(c *check, earlier *canon.Call) {
	if earlier == nil || earlier.IdentityDigest != c.call.IdentityDigest {
		return
	}
	for _, line := range canon.TypedEqualities(c.call, earlier) {
		c.note("identity restated: %s", line)
	}
}

// contrastWith names how the call's text contradicts the earlier call's
// (see contrast), or "" when it does not; earlier is nil when the record's
// call could not be read.
func (f *Funnel) contrastWith(c *check, earlier *canon.Call) string {
	if !c.call.HasText() {
		return ""
	}
	if earlier == nil {
		return "an unreadable record" // cannot tell: the embedding alone must not decide
	}
	return contrast(c.call.TextView(), earlier.TextView())
}

// earlierCall reads a record's call back, or nil when it cannot. The
// record keeps no reference date: the call is read against the check's,
// and that reading stands when it gives the identity digest the record
// was written with (the earlier call was made on the same day, or has no
// relative dates); otherwise its relative dates stay strings.
func (f *Funnel) earlierCall(c *check, r *ledger.Record) *canon.Call {
	if !c.today.IsZero() {
		if call, err := f.canon.CanonicalizeOn(r.Tool, r.Canonical, c.today); err == nil && call.IdentityDigest == r.Identity {
			return call
		}
	}
	call, err := f.canon.Canonicalize(r.Tool, r.Canonical)
	if err != nil {
		return nil
	}
	return call
}

// judgeStage asks the judge about an ambiguous candidate.
func (f *Funnel) judgeStage(ctx, bctx context.Context, c *check, cd *candidate, got ledger.Claim) (bool, error) {
	if f.judge == nil || !c.pol.Judge {
		c.note("similarity %.3f is in the ambiguous band and no judge is configured", cd.score)
		return f.fallbackFor(ctx, c, got, cd.score, "")
	}
	remain := time.Until(c.deadline) - f.cfg.JudgeReserve
	if remain <= 0 {
		return f.fallbackFor(ctx, c, got, cd.score, "the budget ran out before the judge could be asked")
	}
	jctx, cancel := context.WithTimeout(bctx, remain)
	defer cancel()
	v, err := f.judge.Compare(jctx, judge.Request{
		Tool: c.req.Tool, Schema: f.cfg.Tools[c.req.Tool].Schema,
		Earlier: got.Record.Canonical, Current: c.call.Canonical,
		EarlierStatus: got.Record.Status.String(),
	})
	c.lap("judge")
	if err != nil {
		if jctx.Err() != nil && ctx.Err() == nil {
			return f.fallbackFor(ctx, c, got, cd.score, "the judge did not answer within the budget")
		}
		c.note("judge error: %v", err)
		return f.fallbackFor(ctx, c, got, cd.score, "")
	}
	c.res.Judge = &Verdict{Duplicate: v.Duplicate, Confidence: v.Confidence, Reason: v.Reason}
	if v.Duplicate {
		c.res.Stage = StageJudge
		return f.onDuplicate(ctx, c, got, cd.score, "the judge found it repeats an earlier call: "+v.Reason)
	}
	return false, nil
}

// onDuplicate applies the policy's action to a semantic or judged duplicate.
func (f *Funnel) onDuplicate(ctx context.Context, c *check, got ledger.Claim, sim float64, reason string) (bool, error) {
	switch c.pol.OnDuplicate {
	case ActionReplay:
		return true, f.replay(ctx, c, got, sim, reason)
	case ActionConfirm:
		c.res.Decision, c.res.Match = Confirm, matchOf(&got.Record, sim)
		c.res.Reason = reason + ": confirm before executing"
		return true, nil
	default: // Warn
		c.res.Match = matchOf(&got.Record, sim)
		c.note("warn: %s", reason)
		return false, nil
	}
}

// fallbackFor applies the policy's fallback to an undecided candidate.
func (f *Funnel) fallbackFor(ctx context.Context, c *check, got ledger.Claim, sim float64, budget string) (bool, error) {
	m := matchOf(&got.Record, sim)
	return f.fallback(ctx, c, m, budget)
}

// fallback decides by the policy's fallback. budget, when not empty, says
// how the budget ran out.
func (f *Funnel) fallback(_ context.Context, c *check, m *Match, budget string) (bool, error) {
	if budget != "" {
		c.res.BudgetExceeded = true
		c.note("%s", budget)
	}
	c.res.Match = m
	if c.pol.Fallback == FallbackConfirm {
		c.res.Decision, c.res.Stage = Confirm, StageSemantic
		if m != nil && c.res.Judge == nil && budget == "" {
			c.res.Stage = StageJudge
		}
		c.res.Reason = "the semantic stage could not decide; the policy's fallback asks for confirmation"
		return true, nil
	}
	c.note("fallback: execute")
	return false, nil
}

// embedText embeds the call's text view: whole when the model reads it
// all, else window by window.
func (f *Funnel) embedText(ctx context.Context, c *check) ([][]float32, error) {
	texts, err := f.windows(c.call.TextView())
	if err != nil {
		return nil, err
	}
	if len(texts) > 1 {
		c.note("text view longer than the encoder's %d tokens: compared in %d windows", f.tok.MaxTokens(), len(texts))
	}
	v, err := f.embedder.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	if len(v) != len(texts) {
		return nil, fmt.Errorf("funnel: embedder returned %d vectors for %d texts", len(v), len(texts))
	}
	for _, x := range v {
		if len(x) != f.dim {
			return nil, fmt.Errorf("funnel: embedder returned a vector of %d values, want %d", len(x), f.dim)
		}
	}
	return v, nil
}

// windows splits the text view into the pieces the model reads whole
// (Windows); without a tokenizer the view is one piece.
func (f *Funnel) windows(text string) ([]string, error) {
	if f.tok == nil {
		return []string{text}, nil
	}
	return Windows(f.tok, text)
}

// Windows splits text at word boundaries into pieces of at most
// tok.MaxTokens() tokens: each piece holds as many words as fit, and a
// single word longer than the model reads is a piece of its own (cut by
// the model). A text that fits is one piece. The bench harness embeds
// texts the same way.
func Windows(tok Tokenizer, text string) ([]string, error) {
	limit := tok.MaxTokens()
	fits := func(s string) (bool, error) {
		t, err := tok.Tokenize(s)
		return t.Count() <= limit, err
	}
	whole, err := tok.Tokenize(text)
	if err != nil {
		return nil, err
	}
	if whole.Count() <= limit {
		return []string{text}, nil
	}
	words := strings.Fields(text)
	// A first guess at words per window from the text's tokens per word,
	// shrunk until the window fits.
	per := max(1, len(words)*limit*9/(10*whole.Count()))
	var out []string
	for start := 0; start < len(words); {
		n := min(per, len(words)-start)
		piece := strings.Join(words[start:start+n], " ")
		for n > 1 {
			ok, err := fits(piece)
			if err != nil {
				return nil, err
			}
			if ok {
				break
			}
			n = max(1, n*3/4)
			piece = strings.Join(words[start:start+n], " ")
		}
		out = append(out, piece)
		start += n
	}
	return out, nil
}

// maxFenceRounds bounds how often a claim is fenced again after the
// session moved on under it (see claim).
const maxFenceRounds = 8

// claim claims the key for execution. Under the session's lock it first
// compares the call with calls claimed in the session since this check
// looked, so two checks of one session racing each other in this process
// cannot both execute the same effect.
//
// Other replicas do not take this lock, so the claim is fenced on the
// newest session Seq the call was compared with: if a call of another
// replica took a number since, the ledger refuses the claim
// (ledger.ErrSessionMoved, nothing written), and the claim refreshes the
// view, compares the call with what arrived, and tries again, at most
// maxFenceRounds times; then the error goes to the caller, who may retry.
// The fence is on only while the late look is (the policy is semantic and
// nothing matched yet): otherwise a late arrival would change nothing.
func (f *Funnel) claim(ctx context.Context, c *check) error {
	s := f.sessions.get(c.scope)
	s.mu.Lock()
	defer s.mu.Unlock()
	req := ledger.ClaimRequest{
		Tenant: c.req.Tenant, Key: c.key, Session: c.req.Session, Workflow: c.req.Workflow,
		Step: c.req.Step, Tool: c.req.Tool, Canonical: c.call.Canonical, Hash: c.call.Hash,
		Identity: c.call.IdentityDigest, Attempt: c.req.Attempt.Number, Lease: c.pol.Lease,
	}
	if len(c.windows) > 0 {
		req.Embedding = slices.Concat(c.windows...)
		req.EmbeddingModel = f.embedder.Name()
	}
	var moved *ledger.SessionMovedError // the last refusal, told to the view after its refresh
	for round := 1; ; round++ {
		req.Fenced, req.SessionSeen = false, 0
		if c.pol.Semantic {
			if moved != nil && moved.Last < s.lastSeq {
				f.log.WarnContext(ctx, "funnel: session numbering restarted; reloading its view", "tenant", c.req.Tenant)
				s.reset()
				c.seenSeq = 0
			}
			if _, err := f.refresh(ctx, s, c.req.Tenant, c.req.Session, c.scope); err != nil {
				return err
			}
			if moved != nil {
				// Listed after the refusal: the view holds every live
				// record numbered up to where the counter stood.
				s.covered = max(s.covered, moved.Last)
			}
			if c.res.Match == nil {
				if late := s.since(c.seenSeq); len(late) > 0 {
					// Under the session's lock: a match is answered as it stands,
					// without waiting for it (that would hold up the session).
					c.locked = true
					done, err := f.late(ctx, c, late)
					c.locked = false
					if err != nil || done {
						return err
					}
				}
				c.seenSeq = s.lastSeq
				req.Fenced, req.SessionSeen = c.res.Match == nil && c.req.Session != "", s.covered
			}
		}
		start := time.Now()
		got, err := f.ledger.Claim(ctx, req)
		c.res.TimingsUS["claim"] += time.Since(start).Microseconds()
		c.mark = time.Now()
		if m, ok := errors.AsType[*ledger.SessionMovedError](err); ok && round < maxFenceRounds {
			moved = m
			continue
		}
		if err != nil {
			if errors.Is(err, ledger.ErrSessionMoved) {
				f.log.WarnContext(ctx, "funnel: the session kept moving under the claim", "tenant", c.req.Tenant, "key", c.key, "rounds", round)
			}
			return err
		}
		if round > 1 {
			c.note("the session moved on during the claim; compared again %d times", round-1)
		}
		if got.Outcome != ledger.Claimed {
			// Another check of this key won the race.
			_, err := f.decideKey(ctx, c, got, false)
			return err
		}
		f.granted(c, s, &got)
		return nil
	}
}

// late compares the call with entries claimed after this check looked.
func (f *Funnel) late(ctx context.Context, c *check, late []*entry) (bool, error) {
	var exact []*entry
	for _, e := range late {
		if e.hash == c.call.Hash {
			exact = append(exact, e)
		}
	}
	if done, err := f.exactStage(ctx, c, exact); err != nil || done {
		return done, err
	}
	var cands []candidate
	switch {
	case len(c.windows) > 0:
		var err error
		if cands, err = f.score(ctx, c, late, false); err != nil {
			return false, err
		}
	case !c.call.HasText():
		cands = f.identityCandidates(ctx, c, late, false)
	}
	for _, cd := range cands {
		if cd.score < c.pol.DuplicateThreshold {
			break
		}
		got, ok := cd.got, cd.fetched
		if !cd.fetched {
			var err error
			if got, ok, err = f.live(ctx, c, cd.e.key); err != nil {
				return false, err
			}
		}
		if ok && f.contrastWith(c, f.earlierCall(c, &got.Record)) == "" {
			c.res.Stage = StageSemantic
			return f.onDuplicate(ctx, c, got, cd.score, "a call of the same tool with equal identity fields was claimed in this session a moment ago")
		}
	}
	return false, nil
}

// granted fills in an execute and records the new entry in the session.
func (f *Funnel) granted(c *check, s *session, got *ledger.Claim) {
	c.res.Decision, c.res.Token = Execute, got.Token
	c.res.LeaseUntil = time.UnixMilli(got.Record.LeaseUntil)
	if c.res.Stage == "" {
		c.res.Stage = StageNew
	}
	if c.res.Reason == "" {
		c.res.Reason = "no earlier call of this effect was found"
		if c.res.Match != nil {
			c.res.Reason = "the nearest earlier call was not judged the same effect"
		}
	}
	if c.pol.Semantic {
		e := entryOf(&got.Record, f.dim)
		s.add(e)
		if f.index != nil && len(c.windows) > 0 {
			f.indexAdd(c.scope, []index.Entry{{ID: e.key, Tag: e.tool, Seq: e.seq, Vector: c.windows[0]}})
		}
	}
}

// takeover claims an uncertain key anew.
func (f *Funnel) takeover(ctx context.Context, c *check) error {
	req := ledger.ClaimRequest{
		Tenant: c.req.Tenant, Key: c.key, Session: c.req.Session, Workflow: c.req.Workflow,
		Step: c.req.Step, Tool: c.req.Tool, Canonical: c.call.Canonical, Hash: c.call.Hash,
		Identity: c.call.IdentityDigest, Attempt: c.req.Attempt.Number, Lease: c.pol.Lease,
	}
	got, err := f.ledger.Takeover(ctx, req)
	if err != nil {
		return err
	}
	if got.Outcome != ledger.Claimed {
		_, err := f.decideKey(ctx, c, got, false)
		return err
	}
	c.res.Stage = StageKey
	c.res.Reason = "the uncertain execution under this key was taken over"
	s := f.sessions.get(c.scope)
	s.mu.Lock()
	f.granted(c, s, &got)
	s.mu.Unlock()
	return nil
}

// indexAdd adds calls' first text windows to the index.
func (f *Funnel) indexAdd(scope string, batch []index.Entry) {
	if f.index == nil || len(batch) == 0 {
		return
	}
	if err := f.index.Add(scope, batch...); err != nil {
		f.log.Warn("index add", "entries", len(batch), "err", err)
	}
}

// MarshalJSON adds the hash and identity digest in hex.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	return json.Marshal(struct {
		plain
		Hash     string `json:"hash"`
		Identity string `json:"identity_digest"`
	}{plain(r), fmt.Sprintf("%016x", r.Hash), fmt.Sprintf("%016x", r.IdentityDigest)})
}
