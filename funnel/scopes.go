package funnel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/index"
	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/pairscore"
)

// Scopes wider than a session. A policy's scope may be a workflow (every
// session of the call's workflow: sub-agents re-running a step, each in
// its own session) or the tenant (every session: a tenant-wide semantic
// cache for read-only tools). After the session's own stages found
// nothing, the call is compared with the wider scope's calls of the same
// tool whose identity fields equal its own, with the same thresholds,
// guard and policy; the answer names the scope and the session matched.
//
// The calls of a wide scope are held in an index (Deps.Scopes, an
// *index.Flat): each under a tag of its tool, identity digest and whether
// it has text, with the first window of its embedding (calls without text
// all with one unit vector), searched exactly below index.Config.ANNMin
// calls of a tag and through an HNSW graph above it; hits are re-scored
// exactly from their records. The index is a cache of the ledger, loaded
// through ScopeLoader. A call with text claimed a moment before in another
// session, whose embedding is still being computed, is not in the index
// yet: this process keeps it aside (landing) until its embedding lands,
// and a check of the same scope and tag waits for that embedding within
// its budget and compares it, or says it could not. A call whose record
// holds no embedding (claimed through another replica still computing it,
// or by a process that stopped first) is loaded as a blind entry, which
// the check embeds itself.

// ScopeKind names a policy's scope.
type ScopeKind string

// The scopes.
const (
	ScopeSession  ScopeKind = "session"
	ScopeWorkflow ScopeKind = "workflow"
	ScopeTenant   ScopeKind = "tenant"
)

// Searcher holds the calls of wide scopes (*index.Flat provides it).
type Searcher interface {
	Add(scope string, entries ...index.Entry) error
	Search(ctx context.Context, scope, tag string, query []float32, k int) ([]index.Hit, error)
	Has(ctx context.Context, scope, tag string) (bool, error)
}

// wideScope names the index scope of the call's wide scope, or "" when
// the policy's scope is the session (or a workflow scope for a call with
// no workflow).
func wideScope(pol *Policy, tenant, workflow string) string {
	switch pol.Scope {
	case ScopeWorkflow:
		if workflow == "" {
			return ""
		}
		return tenant + "\x00wf:" + workflow
	case ScopeTenant:
		return tenant + "\x00tenant"
	}
	return ""
}

// scopeTag is the index tag of a call in a wide scope: its tool, its
// identity digest and whether it has text, so that a search looks only
// at calls that pass the identity gate.
func scopeTag(tool string, identity uint64, text bool) string {
	t := "t"
	if !text {
		t = "n"
	}
	return tool + "\x00" + strconv.FormatUint(identity, 16) + "\x00" + t
}

// unit is the vector of every call without text in a wide scope.
func unit(dim int) []float32 {
	v := make([]float32, dim)
	v[0] = 1
	return v
}

// where says where a candidate call was made, for the answer's reason.
func where(c *check, e *entry) string {
	if e.session != "" && e.session != c.req.Session {
		return fmt.Sprintf("in session %q of this %s", e.session, c.pol.Scope)
	}
	return "in this session"
}

// scopeStage compares the call with the calls of its policy's wide scope
// made in other sessions. It reports done when one decided.
func (f *Funnel) scopeStage(ctx context.Context, c *check) (bool, error) {
	name := wideScope(c.pol, c.req.Tenant, c.req.Workflow)
	if name == "" || f.scopes == nil || c.res.Match != nil {
		return false, nil
	}
	bctx, cancel := context.WithDeadline(ctx, c.deadline)
	defer cancel()
	text := c.call.HasText()
	tag := scopeTag(c.req.Tool, c.call.IdentityDigest, text)
	has, err := f.scopes.Has(bctx, name, tag)
	if err != nil {
		if why, ok := f.whyNot(ctx, bctx, err); ok {
			return f.uncomparedScope(c, why)
		}
		return false, err
	}
	incoming := f.landing.of(name, tag, c.req.Session)
	if !has && len(incoming) == 0 {
		return false, nil
	}
	query := f.unit
	if text {
		if f.enc == nil {
			return false, nil
		}
		own, err := f.embedOwn(c)
		if err == nil {
			c.windows, err = own.wait(bctx)
		}
		c.lap("embed")
		if err != nil {
			if why, ok := f.whyNot(ctx, bctx, err); ok {
				return f.uncomparedScope(c, why)
			}
			return false, err
		}
		query = c.windows[0]
	}
	var hits []index.Hit
	if has {
		hits, err = f.scopes.Search(bctx, name, tag, query, f.cfg.TopK)
		if err != nil {
			if why, ok := f.whyNot(ctx, bctx, err); ok {
				return f.uncomparedScope(c, why)
			}
			return false, err
		}
	}
	// The calls whose embedding is still coming: wait for it.
	landed := map[string][][]float32{}
	for _, l := range incoming {
		if slices.ContainsFunc(hits, func(h index.Hit) bool { return h.ID == l.e.key }) {
			continue
		}
		vecs, err := f.awaitLanding(ctx, bctx, c, l)
		if err != nil {
			if why, ok := f.whyNot(ctx, bctx, err); ok {
				return f.uncomparedScope(c, why)
			}
			return false, err
		}
		if vecs != nil {
			landed[l.e.key] = vecs
			hits = append(hits, index.Hit{ID: l.e.key})
		}
	}
	if d, ok := f.scopes.(interface{ Dropped(string) uint64 }); ok {
		if n := d.Dropped(name); n > 0 {
			c.note("the %s's %d oldest calls were not compared: past index.max_per_scope, the index keeps a scope's newest calls only", c.pol.Scope, n)
		}
	}
	// The calls the index knows without their embedding (from the
	// ledger: claimed by another process or replica, or by a claimant that
	// stopped first): embed them now.
	if b, ok := f.scopes.(interface {
		Blind(scope, tag string) []string
	}); ok && text {
		ids := slices.DeleteFunc(b.Blind(name, tag), func(id string) bool {
			_, ok := landed[id]
			return ok || slices.ContainsFunc(incoming, func(l coming) bool { return l.e.key == id })
		})
		for i, id := range ids {
			if i == f.cfg.TopK {
				return f.uncomparedScope(c, fmt.Sprintf("more than %d of its calls had no embedding yet", f.cfg.TopK))
			}
			vecs, err := f.embedBlind(ctx, bctx, c, name, tag, id)
			if err != nil {
				if why, ok := f.whyNot(ctx, bctx, err); ok {
					return f.uncomparedScope(c, why)
				}
				return false, err
			}
			if vecs != nil {
				landed[id] = vecs
				hits = append(hits, index.Hit{ID: id})
			}
		}
	}
	var cands []candidate
	for _, h := range hits {
		got, ok, err := f.live(ctx, c, h.ID)
		if err != nil {
			return false, err
		}
		r := &got.Record
		if !ok || r.Session == c.req.Session || r.Tool != c.req.Tool || r.Identity != c.call.IdentityDigest {
			continue // the session's own calls were compared by its stages
		}
		e := &entry{key: r.Key, base: baseKey(r.Key), tool: r.Tool, hash: r.Hash, identity: r.Identity,
			seq: r.Seq, createdAt: r.CreatedAt, session: r.Session}
		if !f.eligible(c, e) {
			continue
		}
		if r.Hash == c.call.Hash && !f.anotherDay(c, e) {
			c.res.Stage, c.res.Scope = StageExact, string(c.pol.Scope)
			return true, f.replay(ctx, c, got, 1, fmt.Sprintf("the same call (same tool and canonical arguments) was made %s", where(c, e)))
		}
		cd := candidate{e: e, score: 1, cosine: 1, got: got, fetched: true}
		if text {
			vecs := windowsOf(r.Embedding, f.dim)
			if r.EmbeddingModel != f.model {
				vecs = nil
			}
			if len(vecs) == 0 {
				vecs = landed[r.Key]
			}
			if len(vecs) == 0 {
				continue
			}
			cosines, mismatch := f.compare(c.windows, vecs)
			cd.cosine = lowest(cosines)
			cd.score = cd.cosine
			if f.scorer != nil {
				earlier := f.earlierCall(c, r)
				if earlier == nil {
					continue
				}
				s := f.scorer.Score(pairscore.Pair{A: earlier.TextView(), B: c.call.TextView(), Cosines: cosines})
				cd.score, cd.prob, cd.differs = s.Prob, s.Prob, s.Differs
			}
			if mismatch {
				cd.score = math.Min(cd.score, math.Nextafter(c.dup, 0))
			}
		}
		cands = append(cands, cd)
	}
	byScore(cands)
	c.lap("scope")
	done, err := f.decideCandidates(ctx, bctx, c, cands)
	if c.res.Match != nil && c.res.Match.Session != c.req.Session {
		c.res.Scope = string(c.pol.Scope)
	}
	return done, err
}

// uncomparedScope decides for a call whose wide scope could not be
// searched in time: the policy's Uncompared fallback, saying so.
func (f *Funnel) uncomparedScope(c *check, why string) (bool, error) {
	what := fmt.Sprintf("the %s's calls in other sessions could not be compared with this call (%s)", c.pol.Scope, why)
	c.res.NotCompared = &NotCompared{Reason: why}
	if strings.HasPrefix(why, "budget") {
		c.res.BudgetExceeded = true
	}
	c.note("not compared: %s", what)
	if c.pol.uncompared() == FallbackConfirm {
		c.res.Decision, c.res.Stage, c.res.Scope = Confirm, StageSemantic, string(c.pol.Scope)
		c.res.Reason = what + ": confirm before executing"
		return true, nil
	}
	return false, nil
}

// joinScope adds a claimed call to its policy's wide scope: now when its
// embedding is known (or it has none), else when its embedding lands
// (see landed). The caller holds the session's lock.
func (f *Funnel) joinScope(c *check, s *session, e *entry) {
	name := wideScope(c.pol, c.req.Tenant, c.req.Workflow)
	if name == "" || f.scopes == nil {
		return
	}
	text := c.call.HasText()
	tag := scopeTag(e.tool, e.identity, text)
	switch {
	case !text:
		f.addScope(name, tag, e, f.unit)
	case c.windows != nil:
		f.addScope(name, tag, e, c.windows[0])
	default:
		e.wide, e.wideTag = name, tag
		f.landing.add(name, tag, coming{e: e, s: s, session: c.req.Session})
	}
}

func (f *Funnel) addScope(name, tag string, e *entry, vec []float32) {
	if err := f.scopes.Add(name, index.Entry{ID: e.key, Tag: tag, Seq: uint64(e.createdAt), Vector: vec}); err != nil {
		f.log.Warn("funnel: adding a call to its scope", "key", e.key, "err", err)
	}
}

// ScopeLedger is what ScopeLoader lists wide scopes from (*ledger.Ledger
// provides it).
type ScopeLedger interface {
	Workflow(ctx context.Context, tenant, workflow string) ([]ledger.Record, error)
	Tenant(ctx context.Context, tenant string, since int64, limit int) ([]ledger.Record, error)
}

// ScopeLoader returns the index.Loader of wide scopes (as wideScope names
// them) from the ledger: each call created after afterSeq (Unix ms), under
// its scopeTag, with the first window of its embedding by model (calls
// without text with the unit vector; a call with text whose record holds
// no embedding yet as a blind entry, which a check of the scope embeds).
// cn reads a record's call back to tell a call without text.
func ScopeLoader(l ScopeLedger, cn *canon.Canonicalizer, model string, dim int) index.Loader {
	return index.LoaderFunc(func(ctx context.Context, scope string, after uint64) ([]index.Entry, uint64, error) {
		tenant, kind, ok := strings.Cut(scope, "\x00")
		if !ok {
			return nil, 0, fmt.Errorf("funnel: malformed scope %q", scope)
		}
		var recs []ledger.Record
		var err error
		switch {
		case kind == "tenant":
			recs, err = l.Tenant(ctx, tenant, int64(after)+1, 0)
		case strings.HasPrefix(kind, "wf:"):
			recs, err = l.Workflow(ctx, tenant, strings.TrimPrefix(kind, "wf:"))
		default:
			return nil, 0, fmt.Errorf("funnel: malformed scope %q", scope)
		}
		if errors.Is(err, errors.ErrUnsupported) {
			return nil, after, nil // the store cannot list it: the scope holds what this process adds
		}
		if err != nil {
			return nil, 0, err
		}
		through := after
		out := make([]index.Entry, 0, len(recs))
		u := unit(dim)
		for i := range recs {
			r := &recs[i]
			if uint64(r.CreatedAt) <= after || r.Status == ledger.StatusFailed {
				continue
			}
			through = max(through, uint64(r.CreatedAt))
			if w := windowsOf(r.Embedding, dim); r.EmbeddingModel == model && len(w) > 0 {
				out = append(out, index.Entry{ID: r.Key, Tag: scopeTag(r.Tool, r.Identity, true), Seq: uint64(r.CreatedAt), Vector: w[0]})
				continue
			}
			call, err := cn.Canonicalize(r.Tool, r.Canonical)
			switch {
			case err != nil:
			case !call.HasText():
				out = append(out, index.Entry{ID: r.Key, Tag: scopeTag(r.Tool, r.Identity, false), Seq: uint64(r.CreatedAt), Vector: u})
			default:
				// Text, no embedding yet (being computed, or its claimant
				// stopped first): a check of the scope embeds it.
				out = append(out, index.Entry{ID: r.Key, Tag: scopeTag(r.Tool, r.Identity, true), Seq: uint64(r.CreatedAt), Blind: true})
			}
		}
		return out, through, nil
	})
}
