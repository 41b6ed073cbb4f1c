package ledger

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"
)

// Config configures a Ledger. Start from DefaultConfig. A plain value;
// New copies it.
type Config struct {
	// Lease is how long a claim holds its key before it becomes uncertain,
	// unless the claim asks for its own. Size it from the slowest
	// execution (observed P999) plus the client's retry period; a holder
	// that runs longer renews it (Renew).
	Lease time.Duration
	// MaxLease bounds how long one claim may hold its key, renewals
	// included: no lease (a claim's own or a renewal) ends later than
	// MaxLease after the claim.
	MaxLease time.Duration
	// Retention is how long SUCCESS and FAILED records are kept and
	// replayed. A PENDING record is kept for Lease + Retention.
	Retention time.Duration
	// MaxResultBytes bounds a recorded result or error, and the canonical
	// call, in bytes.
	MaxResultBytes int
	// Now is the clock; nil means time.Now. Tests inject one.
	Now func() time.Time
	// Logger receives the ledger's log lines (keys, outcomes, never
	// arguments or results); nil discards them.
	Logger *slog.Logger
}

// DefaultConfig returns a 5-minute lease renewable up to an hour, 24-hour
// retention and a 1 MiB bound on results.
func DefaultConfig() Config {
	return Config{
		Lease:          5 * time.Minute,
		MaxLease:       time.Hour,
		Retention:      24 * time.Hour,
		MaxResultBytes: 1 << 20,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Lease <= 0:
		return fmt.Errorf("ledger config: Lease must be positive, got %v", c.Lease)
	case c.MaxLease < c.Lease:
		return fmt.Errorf("ledger config: MaxLease (%v) must be at least Lease (%v)", c.MaxLease, c.Lease)
	case c.Retention <= 0:
		return fmt.Errorf("ledger config: Retention must be positive, got %v", c.Retention)
	case c.MaxResultBytes <= 0:
		return fmt.Errorf("ledger config: MaxResultBytes must be positive, got %d", c.MaxResultBytes)
	}
	return nil
}

// Ledger is the idempotency ledger over a Store. It is safe for concurrent
// use and owns no goroutines; the caller owns (and closes) the Store.
type Ledger struct {
	store Store
	cfg   Config
	now   func() time.Time
	log   *slog.Logger
}

// New returns a Ledger over store, or an error if cfg is invalid.
func New(store Store, cfg Config) (*Ledger, error) {
	if store == nil {
		return nil, errors.New("ledger: nil store")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Ledger{store: store, cfg: cfg, now: cfg.Now, log: cfg.Logger}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return l, nil
}

// ClaimRequest is a call asking to execute under a key. A plain value; the
// ledger copies what it keeps.
type ClaimRequest struct {
	Tenant, Key                   string // required; Key usually from KeyFor
	Session, Workflow, Step, Tool string

	Canonical      []byte
	Hash, Identity uint64
	Embedding      []float32
	EmbeddingModel string

	Attempt int
	// Confirmed is the key of an earlier call the caller confirmed this
	// call to be another action than (empty: none); the claim stores it on
	// the record it writes, so the record says what it was executed under.
	// When set, it must be a valid key (see CheckKey).
	Confirmed string
	// Lease overrides Config.Lease for this claim when positive; it is cut
	// to Config.MaxLease.
	Lease time.Duration

	// Fenced makes the claim conditional on the session: when it would
	// write a record that takes a new Seq of (Tenant, Session), the store
	// writes only if the session's counter still stands at SessionSeen,
	// the newest Seq the caller has compared its call against; otherwise
	// the claim writes nothing and fails with ErrSessionMoved. A claim that
	// finds its key held (InProgress, Duplicate, …) answers as unfenced.
	// With an empty Session the fence is ignored. A bool beside a plain
	// number, rather than a pointer, keeps the request a plain value whose
	// zero is the unfenced claim.
	Fenced      bool
	SessionSeen uint64
}

func (l *Ledger) checkClaim(req *ClaimRequest) error {
	if err := checkTenant(req.Tenant); err != nil {
		return err
	}
	if err := checkKey(req.Key); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{
		{"session_id", req.Session}, {"workflow_id", req.Workflow}, {"step_id", req.Step},
		{"tool", req.Tool}, {"embedding_model", req.EmbeddingModel},
	} {
		if len(f.v) > MaxKeyBytes {
			return tooLarge(f.name, len(f.v), MaxKeyBytes)
		}
	}
	if req.Confirmed != "" {
		if err := CheckKey("confirmed", req.Confirmed); err != nil {
			return err
		}
	}
	if len(req.Canonical) > l.cfg.MaxResultBytes {
		return tooLarge("canonical", len(req.Canonical), l.cfg.MaxResultBytes)
	}
	if req.Lease < 0 {
		return invalid("lease", "negative")
	}
	if req.Attempt < 0 {
		return invalid("attempt", "negative")
	}
	for _, v := range req.Embedding {
		if v-v != 0 { // NaN or ±Inf
			return invalid("embedding", "holds NaN or Inf")
		}
	}
	return nil
}

// Claim claims req.Key for execution. When the key is free (absent, past
// retention, or FAILED transient) the answer is Claimed with a new lease
// token; otherwise it says what holds the key: InProgress, Duplicate,
// FailedPermanent or Uncertain, with that record. A fenced claim
// (req.Fenced) of a free key fails with ErrSessionMoved, writing nothing,
// when the session has moved past req.SessionSeen. Claim looks at req.Key
// only, never at the old form of an explicit key (see Get): a caller reads
// a key before it claims it, and the old form is never written any more.
func (l *Ledger) Claim(ctx context.Context, req ClaimRequest) (Claim, error) {
	return l.claim(ctx, req, false)
}

// Takeover claims req.Key like Claim, and also takes over an uncertain
// record (PENDING with an expired lease) with a new token, so that the
// old holder's token goes stale. Of several concurrent takeovers one wins;
// the others see InProgress.
func (l *Ledger) Takeover(ctx context.Context, req ClaimRequest) (Claim, error) {
	return l.claim(ctx, req, true)
}

func (l *Ledger) claim(ctx context.Context, req ClaimRequest, takeover bool) (Claim, error) {
	op := "claim"
	if takeover {
		op = "takeover"
	}
	if err := l.checkClaim(&req); err != nil {
		return Claim{}, fmt.Errorf("%s: %w", op, err)
	}
	token := rand.Text()
	lease := req.Lease
	if lease == 0 {
		lease = l.cfg.Lease
	}
	lease = min(lease, l.cfg.MaxLease)
	var (
		out     Claim
		written *Record
	)
	update := l.store.Update
	if req.Fenced && req.Session != "" {
		fs, ok := l.store.(FencedStore)
		if !ok {
			return Claim{}, fmt.Errorf("%s %q: fenced claim: the store cannot fence: %w", op, req.Key, errors.ErrUnsupported)
		}
		update = func(ctx context.Context, tenant, key string, fn func(*Record) (*Record, error)) error {
			return fs.UpdateFenced(ctx, tenant, key, req.SessionSeen, fn)
		}
	}
	err := update(ctx, req.Tenant, req.Key, func(cur *Record) (*Record, error) {
		now := l.now()
		ms := now.UnixMilli()
		out, written = Claim{}, nil
		if cur != nil && l.expired(cur, ms) {
			cur = nil
		}
		if cur != nil {
			o := l.outcome(cur, ms)
			free := o == Retryable || (takeover && o == Uncertain)
			// cur is the store's copy, ours to keep.
			cur.Token = ""
			if !free {
				out = Claim{Outcome: o, Record: *cur}
				return nil, nil
			}
			out.Previous = cur
		}
		next := &Record{
			Session: req.Session, Workflow: req.Workflow, Step: req.Step, Tool: req.Tool,
			Canonical: req.Canonical, Hash: req.Hash, Identity: req.Identity,
			Embedding: req.Embedding, EmbeddingModel: req.EmbeddingModel,
			Status: StatusPending, Attempt: req.Attempt, Token: token, Confirmed: req.Confirmed,
			LeaseUntil: now.Add(lease).UnixMilli(), CreatedAt: ms, UpdatedAt: ms,
			RetainUntil: now.Add(lease + l.cfg.Retention).UnixMilli(),
		}
		if cur != nil {
			next.CreatedAt = cur.CreatedAt
		}
		out.Outcome, out.Token, written = Claimed, token, next
		return next, nil
	})
	if err != nil {
		return Claim{}, fmt.Errorf("%s %q: %w", op, req.Key, corrupt(req.Key, err))
	}
	if out.Outcome == Claimed {
		out.Record = written.clone() // the store has set Tenant, Key and Seq
	}
	l.log.DebugContext(ctx, "ledger claim", "tenant", req.Tenant, "key", req.Key, "op", op, "outcome", out.Outcome.String())
	return out, nil
}

// Complete records result (JSON, at most Config.MaxResultBytes) as the
// outcome of the claim holding token: the record becomes SUCCESS and
// waiters are released. It returns the record as it stands, also on
// ErrStaleToken and ErrNotPending, so the caller can see what won.
func (l *Ledger) Complete(ctx context.Context, tenant, key, token string, result json.RawMessage) (Record, error) {
	if err := l.checkResult("result", result); err != nil {
		return Record{}, fmt.Errorf("complete %q: %w", key, err)
	}
	return l.finish(ctx, "complete", tenant, key, token, func(r *Record) {
		r.Status, r.Result, r.Error, r.Class = StatusSuccess, result, nil, ClassNone
	})
}

// Fail records errJSON (JSON, at most Config.MaxResultBytes) as the
// failure of the claim holding token. A transient failure frees the key
// for a new claim; a permanent one is replayed to later claims. It returns
// the record as it stands, like Complete.
func (l *Ledger) Fail(ctx context.Context, tenant, key, token string, errJSON json.RawMessage, class ErrorClass) (Record, error) {
	if err := l.checkResult("error", errJSON); err != nil {
		return Record{}, fmt.Errorf("fail %q: %w", key, err)
	}
	if class != ClassTransient && class != ClassPermanent {
		return Record{}, fmt.Errorf("fail %q: %w", key, invalid("class", "must be transient or permanent, got "+class.String()))
	}
	return l.finish(ctx, "fail", tenant, key, token, func(r *Record) {
		r.Status, r.Result, r.Error, r.Class = StatusFailed, nil, errJSON, class
	})
}

func (l *Ledger) checkResult(field string, v json.RawMessage) error {
	if len(v) > l.cfg.MaxResultBytes {
		return tooLarge(field, len(v), l.cfg.MaxResultBytes)
	}
	if !json.Valid(v) {
		return invalid(field, "not valid JSON")
	}
	return nil
}

func (l *Ledger) finish(ctx context.Context, op, tenant, key, token string, set func(*Record)) (Record, error) {
	return l.holderUpdate(ctx, op, tenant, key, token, func(cur Record, now time.Time) (*Record, error) {
		set(&cur) // cur is the store's copy, ours to change
		cur.UpdatedAt = now.UnixMilli()
		cur.RetainUntil = now.Add(l.cfg.Retention).UnixMilli()
		return &cur, nil
	})
}

// Renew extends the lease of the PENDING record under key held by token,
// so that a call running longer than its lease keeps its key: the lease
// then ends lease from now (Config.Lease when lease is 0), but never later
// than Config.MaxLease after the claim, and never earlier than it already
// did. Only the current token renews: after a takeover the old holder gets
// ErrStaleToken. A lease that expired may be renewed as long as nobody
// took it over (as it may be completed); of a renewal and a takeover
// racing, exactly one wins. A holder past MaxLease gets ErrLeaseLimit.
// It returns the record as it stands, also on those errors.
func (l *Ledger) Renew(ctx context.Context, tenant, key, token string, lease time.Duration) (Record, error) {
	if lease < 0 {
		return Record{}, fmt.Errorf("renew %q: %w", key, invalid("lease", "negative"))
	}
	if lease == 0 {
		lease = l.cfg.Lease
	}
	return l.holderUpdate(ctx, "renew", tenant, key, token, func(cur Record, now time.Time) (*Record, error) {
		// UpdatedAt is the claim's time: a renewal leaves it.
		limit := cur.UpdatedAt + l.cfg.MaxLease.Milliseconds()
		until := min(now.Add(lease).UnixMilli(), limit)
		switch {
		case until <= now.UnixMilli():
			return nil, fmt.Errorf("%w (%v after the claim)", ErrLeaseLimit, l.cfg.MaxLease)
		case until <= cur.LeaseUntil:
			return nil, nil // it already lasts as long
		}
		cur.LeaseUntil = until
		cur.RetainUntil = max(cur.RetainUntil, until+l.cfg.Retention.Milliseconds())
		return &cur, nil
	})
}

// holderUpdate changes the PENDING record under key held by token to what
// next returns (nil: nothing), refusing an absent record (ErrNotFound),
// another token (ErrStaleToken) and a finished record (ErrNotPending). It
// returns the record as it stands or as written, without its token, also
// on those errors.
func (l *Ledger) holderUpdate(ctx context.Context, op, tenant, key, token string, next func(cur Record, now time.Time) (*Record, error)) (Record, error) {
	if err := checkTenant(tenant); err != nil {
		return Record{}, fmt.Errorf("%s: %w", op, err)
	}
	if err := checkKey(key); err != nil {
		return Record{}, fmt.Errorf("%s: %w", op, err)
	}
	if token == "" {
		return Record{}, fmt.Errorf("%s %q: %w", op, key, invalid("token", "empty"))
	}
	var out Record
	err := l.store.Update(ctx, tenant, key, func(cur *Record) (*Record, error) {
		now := l.now()
		out = Record{}
		if cur == nil || l.expired(cur, now.UnixMilli()) {
			return nil, ErrNotFound
		}
		out = *cur
		out.Token = ""
		switch {
		case cur.Token != token:
			return nil, ErrStaleToken
		case cur.Status != StatusPending:
			return nil, fmt.Errorf("%w: it is %s", ErrNotPending, cur.Status)
		}
		n, err := next(*cur, now)
		if err != nil || n == nil {
			return nil, err
		}
		out = *n
		out.Token = ""
		return n, nil
	})
	if err != nil {
		return out, fmt.Errorf("%s %q: %w", op, key, corrupt(key, err))
	}
	l.log.DebugContext(ctx, "ledger "+op, "tenant", tenant, "key", key, "status", out.Status.String(), "lease_until_ms", out.LeaseUntil)
	return out, nil
}

// Get returns the record under (tenant, key) and what a claim would find,
// or an error matching ErrNotFound.
func (l *Ledger) Get(ctx context.Context, tenant, key string) (Claim, error) {
	if err := checkTenant(tenant); err != nil {
		return Claim{}, fmt.Errorf("get: %w", err)
	}
	if err := checkKey(key); err != nil {
		return Claim{}, fmt.Errorf("get: %w", err)
	}
	rec, err := l.read(ctx, tenant, key)
	if err != nil {
		return Claim{}, fmt.Errorf("get %q: %w", key, err)
	}
	rec.Token = "" // rec is ours: stores never alias what they return
	return Claim{Outcome: l.outcome(&rec, l.now().UnixMilli()), Record: rec}, nil
}

// read returns the live record under key. A key of the explicit
// namespace that has none is looked up in the form explicit keys were
// stored in before they had their namespace (the caller's key as given);
// such a record counts only if it was written by the tool the key names,
// under a key that is not its own position. Records in that form are
// never written any more; they vanish with their retention.
func (l *Ledger) read(ctx context.Context, tenant, key string) (Record, error) {
	rec, err := l.store.Get(ctx, tenant, key)
	ms := l.now().UnixMilli()
	if err == nil && l.expired(&rec, ms) {
		err = ErrNotFound
	}
	if !errors.Is(err, ErrNotFound) {
		return rec, corrupt(key, err)
	}
	legacy, tool, ok := legacyKey(key)
	if !ok || checkKey(legacy) != nil {
		return Record{}, err
	}
	old, lerr := l.store.Get(ctx, tenant, legacy)
	switch {
	case errors.Is(lerr, ErrNotFound):
		return Record{}, err
	case errors.Is(lerr, ErrCorrupt):
		return Record{}, err // it cannot be told to be this tool's
	case lerr != nil:
		return Record{}, lerr
	case old.Tool != tool || positional(&old) || l.expired(&old, ms):
		return Record{}, err
	}
	return old, nil
}

// Wait blocks until the record under (tenant, key) leaves PENDING, its
// lease expires (Uncertain), or ctx ends (InProgress with ctx's error). It
// is woken by the store's change notification and a timer for the lease,
// not by polling. A record that disappears yields ErrNotFound.
func (l *Ledger) Wait(ctx context.Context, tenant, key string) (Claim, error) {
	if _, _, ok := legacyKey(key); ok {
		// Watch the key the record is stored under (the old form, maybe).
		if c, err := l.Get(ctx, tenant, key); err == nil {
			key = c.Record.Key
		}
	}
	for {
		changed, stop := l.store.Watch(tenant, key)
		c, err := l.Get(ctx, tenant, key)
		if err != nil || c.Outcome != InProgress {
			stop()
			if err != nil {
				return Claim{}, fmt.Errorf("wait: %w", err)
			}
			return c, nil
		}
		timer := time.NewTimer(time.Duration(c.Record.LeaseUntil-l.now().UnixMilli()+1) * time.Millisecond)
		select {
		case <-changed:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			stop()
			return c, fmt.Errorf("wait %q: %w", key, ctx.Err())
		}
		timer.Stop()
		stop()
	}
}

// Session returns up to limit records of (tenant, session) that arrived
// after the record numbered after (0: from the start), in arrival order.
// limit <= 0 means all. The semantic index rebuilds from this.
func (l *Ledger) Session(ctx context.Context, tenant, session string, after uint64, limit int) ([]Record, error) {
	if err := checkTenant(tenant); err != nil {
		return nil, fmt.Errorf("list session: %w", err)
	}
	if session == "" {
		return nil, fmt.Errorf("list session: %w", invalid("session_id", "empty"))
	}
	var out []Record
	for {
		want := 0 // no limit
		if limit > 0 {
			want = limit - len(out)
		}
		recs, err := l.store.ListSession(ctx, tenant, session, after, want)
		if err != nil {
			return nil, fmt.Errorf("list session: %w", err)
		}
		if len(recs) > 0 {
			after = recs[len(recs)-1].Seq
		}
		out = append(out, l.live(recs)...)
		// A full page that lost records past retention: read on, so a
		// caller paging by Seq is not told the session ends there.
		if want == 0 || len(recs) < want || len(out) == limit {
			return out, nil
		}
	}
}

// Workflow returns the records of (tenant, workflow) in arrival order, so
// an orchestrator can re-run only the unfinished steps.
func (l *Ledger) Workflow(ctx context.Context, tenant, workflow string) ([]Record, error) {
	if err := checkTenant(tenant); err != nil {
		return nil, fmt.Errorf("list workflow: %w", err)
	}
	if workflow == "" {
		return nil, fmt.Errorf("list workflow: %w", invalid("workflow_id", "empty"))
	}
	recs, err := l.store.ListWorkflow(ctx, tenant, workflow)
	if err != nil {
		return nil, fmt.Errorf("list workflow: %w", err)
	}
	return l.live(recs), nil
}

// Forget deletes the record under (tenant, key), for a record a user has
// judged wrong. The next claim of the key executes again; a holder of its
// lease gets ErrNotFound when it completes; waiters get ErrNotFound.
//
// A record whose call is executing under a live lease is refused with
// ErrInProgress unless force is set: forgetting it would let the call run
// a second time while the first still runs. A corrupt record is removed
// whatever it held. (The look at the record is not atomic with the delete:
// a claim landing between them is forgotten too.)
func (l *Ledger) Forget(ctx context.Context, tenant, key string, force bool) error {
	if err := checkTenant(tenant); err != nil {
		return fmt.Errorf("forget: %w", err)
	}
	if err := checkKey(key); err != nil {
		return fmt.Errorf("forget: %w", err)
	}
	rec, err := l.read(ctx, tenant, key)
	switch {
	case errors.Is(err, ErrCorrupt):
		l.log.WarnContext(ctx, "ledger forget of a corrupt record", "tenant", tenant, "key", key, "err", err)
	case err != nil:
		return fmt.Errorf("forget %q: %w", key, err)
	case !force && l.outcome(&rec, l.now().UnixMilli()) == InProgress:
		return fmt.Errorf("forget %q: %w until %s (force to forget it anyway)", key, ErrInProgress,
			time.UnixMilli(rec.LeaseUntil).UTC().Format(time.RFC3339))
	default:
		key = rec.Key // an explicit key's record may be stored in the old form
	}
	if err := l.store.Delete(ctx, tenant, key); err != nil {
		return fmt.Errorf("forget %q: %w", key, err)
	}
	l.log.InfoContext(ctx, "ledger forget", "tenant", tenant, "key", key, "force", force)
	return nil
}

// corrupt names the key in a store's integrity failure.
func corrupt(key string, err error) error {
	if err != nil && errors.Is(err, ErrCorrupt) {
		return Corrupt(key, err)
	}
	return err
}

// live drops records past retention and hides tokens.
func (l *Ledger) live(recs []Record) []Record {
	ms := l.now().UnixMilli()
	recs = slices.DeleteFunc(recs, func(r Record) bool { return l.expired(&r, ms) })
	for i := range recs {
		recs[i].Token = ""
	}
	return recs
}

// expired reports whether r is past retention: it counts as absent.
func (l *Ledger) expired(r *Record, ms int64) bool {
	return r.RetainUntil <= ms
}

// outcome is what a claim at ms finds in r (which is not expired).
func (l *Ledger) outcome(r *Record, ms int64) Outcome {
	switch r.Status {
	case StatusSuccess:
		return Duplicate
	case StatusFailed:
		if r.Class == ClassPermanent {
			return FailedPermanent
		}
		return Retryable
	default:
		if r.LeaseUntil <= ms {
			return Uncertain
		}
		return InProgress
	}
}
