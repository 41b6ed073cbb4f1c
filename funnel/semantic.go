package funnel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/pairscore"
)

// candidate is an earlier call that may be the same effect.
type candidate struct {
	e *entry
	// score is what the thresholds apply to: the cosine of the text views
	// (1 without text), or the pair scorer's probability when it is on.
	score, cosine float64
	// prob and differs are the pair scorer's, when it scored the pair.
	prob    float64
	differs []string
	// probable: its identity values are restated (c.restated), and the
	// policy's identity mode is graded: it may only be asked about.
	probable bool
	// got is the candidate's record, when it was read (live: it counts).
	got     ledger.Claim
	fetched bool
}

// sessionStages runs exact, semantic, judge and policy on the session's
// view. It reports done when one of them decided; otherwise the call goes
// on to the claim.
func (f *Funnel) sessionStages(ctx context.Context, c *check) (bool, error) {
	bctx, cancel := context.WithDeadline(ctx, c.deadline)
	defer cancel()
	s := f.sessions.get(c.scope)
	if err := f.ready(ctx, bctx, s, c.req.Tenant, c.req.Session); err != nil {
		c.lap("refresh")
		if errors.Is(err, errLoading) && ctx.Err() == nil {
			return f.uncompared(ctx, c, nil, "the session's earlier calls are still loading from the ledger")
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, err
	}
	s.mu.Lock()
	err := f.refresh(ctx, s, c.req.Tenant, c.req.Session)
	seen := s.Newest()
	exact := slices.Clone(s.Exact(c.call.Hash))
	gated, shaped, held := f.pool(c, s)
	s.mu.Unlock()
	if err != nil {
		return false, err
	}
	// Calls claimed in this session after this point are compared under
	// the lock that the claim takes (see claim).
	c.seenSeq, c.looked = seen, true
	c.lap("refresh")

	done, err := f.exactStage(ctx, c, exact)
	c.lap("exact")
	if err != nil || done {
		return done, err
	}
	return f.semantic(ctx, bctx, c, s, gated, shaped, held)
}

// maxGraded bounds how many earlier calls of the call's shape a check
// grades for restated identity values (the newest first).
const maxGraded = 256

// pool returns, from the whole view, the calls the semantic stage compares
// the call with: gated, the calls of the tool with equal identity fields
// (every call of the tool when the policy has no identity gate); shaped,
// the newest maxGraded calls of the tool with other identity values on
// the same paths, to be graded (see grade); held, for the judge, the
// newest TopK calls of the tool whose identity fields differ (see
// unparsedOnly). The caller holds s.mu; the slices are copies.
func (f *Funnel) pool(c *check, s *session) (gated, shaped, held []*entry) {
	if es := s.OfTool(c.req.Tool); len(es) > 0 {
		// The view's one copy of the name (see add): comparing it with
		// each candidate's (eligible) then compares two pointers.
		c.req.Tool = es[0].tool
	}
	if !c.pol.IdentityGate {
		return slices.Clone(s.OfTool(c.req.Tool)), nil, nil
	}
	gated = slices.Clone(s.Gated(c.req.Tool, c.call.IdentityDigest))
	if c.pol.Identity != IdentityStrict {
		es := s.Shaped(c.req.Tool, c.call.ShapeDigest)
		shaped = make([]*entry, 0, min(len(es), maxGraded))
		n := 0
		for i := len(es) - 1; i >= 0; i-- {
			if es[i].identity == c.call.IdentityDigest {
				continue
			}
			if n++; n > maxGraded {
				c.note("graded for restated identity values against the newest %d earlier calls of this tool only", maxGraded)
				break
			}
			shaped = append(shaped, es[i])
		}
	}
	if f.judgeMaySee(c) {
		es := s.OfTool(c.req.Tool)
		for i := len(es) - 1; i >= 0 && len(held) < f.cfg.TopK; i-- {
			if es[i].identity != c.call.IdentityDigest {
				held = append(held, es[i])
			}
		}
	}
	return gated, shaped, held
}

// split sorts calls that arrived late (after the check looked) as pool
// does. The caller holds s.mu.
func (f *Funnel) split(c *check, late []*entry) (gated, shaped, held []*entry) {
	judge := f.judgeMaySee(c)
	for _, e := range late {
		switch {
		case e.tool != c.req.Tool:
		case !c.pol.IdentityGate || e.identity == c.call.IdentityDigest:
			gated = append(gated, e)
		default:
			if c.pol.Identity != IdentityStrict && e.read && e.shape == c.call.ShapeDigest {
				shaped = append(shaped, e)
			}
			if judge && len(held) < f.cfg.TopK {
				held = append(held, e)
			}
		}
	}
	return gated, shaped, held
}

// judgeMaySee: earlier calls whose identity fields differ from the call's
// only in values no typed rule read may go to the judge.
func (f *Funnel) judgeMaySee(c *check) bool {
	return f.judge != nil && c.pol.Judge && len(c.call.UnparsedPaths()) > 0
}

// semantic compares the call with gated, shaped and held calls and
// decides, or reports that the call goes on to the claim. Shaped calls
// whose identity values the call restates join the gated ones (as
// probable candidates). Without a candidate nothing is embedded.
func (f *Funnel) semantic(ctx, bctx context.Context, c *check, s *session, gated, shaped, held []*entry) (bool, error) {
	notEligible := func(e *entry) bool { return !f.eligible(c, e) }
	gated = slices.DeleteFunc(gated, notEligible)
	shaped = slices.DeleteFunc(shaped, notEligible)
	held = slices.DeleteFunc(held, notEligible)
	restated, err := f.grade(ctx, c, s, shaped)
	if err != nil {
		return false, err
	}
	if len(restated) > 0 {
		gated = append(gated, restated...)
		held = slices.DeleteFunc(held, func(e *entry) bool { return c.restated[e] != nil })
	}
	if len(gated) == 0 && len(held) == 0 {
		return false, nil
	}
	if !c.call.HasText() {
		cands, err := f.identityCandidates(ctx, c, s, gated, held)
		if err != nil {
			return false, err
		}
		return f.decideCandidates(ctx, bctx, c, cands)
	}
	if f.enc == nil {
		c.note("%d earlier call(s) of this tool with equal identity fields have text; no embedder is configured to compare it", len(gated))
		return false, nil
	}
	return f.textStage(ctx, bctx, c, s, gated, held)
}

// pending is a candidate whose vectors are known (vecs exactly, qv for
// screening) or coming (fl).
type pending struct {
	e       *entry
	held    bool
	vecs    [][]float32
	qv      *qvec
	fl      *flight
	got     ledger.Claim
	fetched bool
}

// textStage embeds the call (and candidates whose embedding is not known
// yet), compares, and decides. A candidate that passed the gate and could
// not be compared makes the policy's Uncompared fallback decide, unless
// another candidate decided first.
func (f *Funnel) textStage(ctx, bctx context.Context, c *check, s *session, gated, held []*entry) (bool, error) {
	own, err := f.embedOwn(c)
	if err != nil {
		if why, ok := f.whyNot(ctx, bctx, err); ok {
			s.mu.Lock()
			gated = slices.DeleteFunc(gated, func(e *entry) bool { return e.text == textNone })
			s.mu.Unlock()
			return f.uncompared(ctx, c, gated, why)
		}
		return false, err
	}
	var (
		items       []pending
		notCompared []*entry // gated candidates
		why         string
		onDemand    int
	)
	miss := func(p pending, reason string) {
		if !p.held {
			notCompared = append(notCompared, p.e)
			if why == "" {
				why = reason
			}
		}
	}
	for i, e := range slices.Concat(gated, held) {
		p := pending{e: e, held: i >= len(gated)}
		s.mu.Lock()
		p.vecs, p.qv, p.fl = e.vecs, e.qv, e.fl
		text := e.text
		s.mu.Unlock()
		switch {
		case p.vecs != nil || p.qv != nil || p.fl != nil:
			items = append(items, p)
			continue
		case text == textNone:
			continue
		}
		// Neither known nor coming: read the record, which may hold it.
		got, ok, err := f.live(ctx, c, e.key)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		p.got, p.fetched = got, true
		if got.Record.EmbeddingModel == f.model {
			if w := windowsOf(got.Record.Embedding, f.dim); len(w) > 0 {
				s.mu.Lock()
				e.qv, e.text = quantize(w), textSome
				s.resize(e)
				s.mu.Unlock()
				p.vecs = w
				items = append(items, p)
				continue
			}
		}
		earlier := f.earlierCall(c, &got.Record)
		switch {
		case earlier == nil:
			miss(p, "its record could not be read back")
			continue
		case !earlier.HasText():
			s.mu.Lock()
			e.text = textNone
			s.mu.Unlock()
			continue
		case onDemand >= f.cfg.TopK:
			miss(p, fmt.Sprintf("more than %d earlier calls had no embedding yet", f.cfg.TopK))
			continue
		}
		onDemand++
		s.mu.Lock()
		p.fl, err = f.embedEntry(s, c.req.Tenant, e, earlier.TextView(), true, c.deadline)
		s.mu.Unlock()
		if err != nil {
			r, ok := f.whyNot(ctx, bctx, err)
			if !ok {
				return false, err
			}
			miss(p, r)
			continue
		}
		items = append(items, p)
	}

	windows, err := own.wait(bctx)
	if err != nil {
		c.lap("embed")
		if r, ok := f.whyNot(ctx, bctx, err); ok {
			for _, p := range items {
				miss(p, r)
			}
			if len(notCompared) == 0 {
				return false, nil // no gated candidate counts: nothing was left uncompared
			}
			why = r // the call itself was not embedded: nothing was compared
			return f.uncompared(ctx, c, notCompared, why)
		}
		return false, err
	}
	c.windows = windows
	norms := l1(windows)
	floor := c.amb
	if f.scorer != nil {
		floor = math.Min(floor, f.floor(c))
	}
	for i := range items {
		p := &items[i]
		if p.vecs != nil {
			continue
		}
		if p.qv != nil {
			// Screened on the quantized vectors; the exact ones come from
			// the record when the screen cannot rule the candidate out.
			if p.qv.upper(windows, norms) < floor {
				continue
			}
			if err := f.exact(ctx, c, p); err != nil {
				return false, err
			}
			continue
		}
		if p.vecs, err = p.fl.wait(bctx); err != nil {
			p.vecs = nil
			r, ok := f.whyNot(ctx, bctx, err)
			if !ok {
				return false, err
			}
			miss(*p, r)
		}
	}
	c.lap("embed")

	var cands []candidate
	nheld := 0
	for _, p := range items {
		if p.vecs == nil {
			continue
		}
		cd := candidate{e: p.e, got: p.got, fetched: p.fetched, probable: f.probable(c, p.e)}
		cosines, mismatch := f.compare(c.windows, p.vecs)
		cd.cosine = lowest(cosines)
		cd.score = cd.cosine
		if f.scorer != nil {
			if err := f.scoreText(ctx, c, &cd, cosines); err != nil {
				return false, err
			}
		}
		if mismatch {
			// Views of a different number of windows differ in text the
			// encoder saw in one and not the other: at most the judge may
			// call them the same.
			cd.score = math.Min(cd.score, math.Nextafter(c.dup, 0))
		}
		if p.held {
			if cd.score < c.amb || !f.unparsedOnly(ctx, c, p.e) {
				continue
			}
			cd.score = math.Min(cd.score, math.Nextafter(c.dup, 0))
			nheld++
		}
		cands = append(cands, cd)
	}
	f.noteHeld(c, nheld)
	byScore(cands)
	c.lap("search")
	done, err := f.decideCandidates(ctx, bctx, c, cands)
	if err != nil || done || len(notCompared) == 0 {
		return done, err
	}
	return f.uncompared(ctx, c, notCompared, why)
}

// exact reads a screened candidate's exact vectors from its record (which
// also says whether its effect counts: one that does not is dropped,
// p.vecs nil). A record without them (written by another model, or not
// yet) leaves the quantized vectors, within rounding.
func (f *Funnel) exact(ctx context.Context, c *check, p *pending) error {
	if !p.fetched {
		got, ok, err := f.live(ctx, c, p.e.key)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		p.got, p.fetched = got, true
	}
	if p.got.Record.EmbeddingModel == f.model {
		if w := windowsOf(p.got.Record.Embedding, f.dim); len(w) == p.qv.windows() {
			p.vecs = w
			return nil
		}
	}
	p.vecs = p.qv.dequantize()
	return nil
}

// whyNot names why an embedding could not be had in time, or reports
// false when err is not that kind of failure (the caller's own ctx ended,
// the funnel is closing): then err goes back to the caller.
func (f *Funnel) whyNot(ctx, bctx context.Context, err error) (string, bool) {
	switch {
	case ctx.Err() != nil, errors.Is(err, errClosed):
		return "", false
	case errors.Is(err, errQueueFull):
		return "the encoder queue is full", true
	case errors.Is(err, errTooLate):
		return "budget (the encoder queue could not embed it in time)", true
	case bctx.Err() != nil:
		return "budget", true
	}
	return "encoder error: " + err.Error(), true
}

// compare returns the cosines of two text views embedded window by
// window, aligned (the lowest is their similarity), and reports whether
// they have a different number of windows.
func (f *Funnel) compare(a, b [][]float32) (cosines []float64, mismatch bool) {
	n := min(len(a), len(b))
	cosines = make([]float64, n)
	for i := range n {
		cosines[i] = dot(a[i], b[i])
	}
	return cosines, len(a) != len(b)
}

// lowest is the smallest of cs (1 for none).
func lowest(cs []float64) float64 {
	m := 1.0
	for _, x := range cs {
		m = math.Min(m, x)
	}
	return m
}

// scoreText scores a candidate with the pair scorer: its probability that
// the two text views ask for the same effect becomes the candidate's
// score, and the words that weighed against it are kept for the answer.
// A candidate whose cosine is below what the ambiguous probability needs
// is not read.
func (f *Funnel) scoreText(ctx context.Context, c *check, cd *candidate, cosines []float64) error {
	cd.score = 0
	if cd.cosine < f.floor(c) {
		return nil
	}
	if !cd.fetched {
		got, ok, err := f.live(ctx, c, cd.e.key)
		if err != nil {
			return err
		}
		cd.got, cd.fetched = got, true
		if !ok {
			return nil // the candidate does not count: decideCandidates skips it
		}
	}
	earlier := f.earlierCall(c, &cd.got.Record)
	if earlier == nil {
		return nil // unreadable: it cannot be scored (score 0), nor replayed
	}
	s := f.scorer.Score(pairscore.Pair{A: earlier.TextView(), B: c.call.TextView(), Cosines: cosines})
	cd.score, cd.prob, cd.differs = s.Prob, s.Prob, s.Differs
	return nil
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// identityCandidates: for a call without text, the gated calls without
// text, newest first; after them, held calls that differ only in identity
// values no typed rule read, at the bottom of the ambiguous band: only the
// judge may call them the same.
func (f *Funnel) identityCandidates(ctx context.Context, c *check, s *session, gated, held []*entry) ([]candidate, error) {
	var cands []candidate
	for i := len(gated) - 1; i >= 0; i-- {
		e := gated[i]
		if e.identity != c.call.IdentityDigest && c.restated[e] == nil {
			continue // a policy without the gate: calls without text still need equal identity
		}
		s.mu.Lock()
		text := e.text
		s.mu.Unlock()
		if c.restated[e] != nil {
			// Graded leaf by leaf: a value prose in one call and a short
			// name in the other ("Tandoori Mahal Indian Restaurant",
			// "Tandoori Mahal") was compared as identity.
			text = textNone
		}
		if text == textSome {
			continue
		}
		cd := candidate{e: e, score: 1, cosine: 1, probable: f.probable(c, e)}
		if text == textUnknown {
			got, earlier, err := f.liveCall(ctx, c, e.key)
			if err != nil {
				return nil, err
			}
			if earlier == nil {
				continue
			}
			s.mu.Lock()
			e.text = textNone
			if earlier.HasText() {
				e.text = textSome
			}
			s.mu.Unlock()
			if earlier.HasText() {
				continue
			}
			cd.got, cd.fetched = got, true
		}
		cands = append(cands, cd)
	}
	n := 0
	for i := len(held) - 1; i >= 0; i-- {
		if f.unparsedOnly(ctx, c, held[i]) {
			cands = append(cands, candidate{e: held[i], score: c.amb, cosine: 1})
			n++
		}
	}
	f.noteHeld(c, n)
	return cands, nil
}

// unparsedOnly reports whether the earlier call e differs from the call
// only in identity strings that no typed rule of canon read (equal
// canon.Call.TypedDigest, unequal IdentityDigest): "SF" for "San
// Francisco" is a restatement the identity gate cannot see and a
// configured judge may. Without a judge, or on any error reading e's
// record, it is false: the gate's answer stands.
func (f *Funnel) unparsedOnly(ctx context.Context, c *check, e *entry) bool {
	if !f.judgeMaySee(c) {
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
		if cd.score < c.amb {
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
		if cd.score >= c.dup {
			earlier = f.earlierCall(c, &got.Record)
			// The pair scorer weighs the contrast guard's signals itself:
			// the guard runs only without it.
			if f.scorer == nil {
				if kind := f.contrastWith(c, earlier); kind != "" {
					cd.score = math.Nextafter(c.dup, 0)
					c.note("the earlier call's text differs in %s: held below the duplicate threshold", kind)
				}
			}
		}
		if cd.score >= c.dup && cd.probable && f.judge != nil && c.pol.Judge {
			// A probable candidate goes to the judge first.
			f.noteReadings(c, cd.e)
			c.res.Match = f.matchOf(c, cd, &got.Record)
			if done, err := f.judgeStage(ctx, bctx, c, cd, got); err != nil || done {
				return done, err
			}
			continue
		}
		if cd.score >= c.dup {
			f.noteRestated(c, earlier)
			f.noteReadings(c, cd.e)
			what := "equal identity fields"
			if cd.probable {
				what = "identity values this call restates"
			} else if c.restated[cd.e] != nil {
				what = "identity values this call restates (read as equal: identity lenient)"
			}
			reason := fmt.Sprintf("a call of the same tool with %s and text similarity %.3f (≥ %.2f) was made %s", what, cd.score, c.dup, where(c, cd.e))
			if f.scorer != nil {
				reason = fmt.Sprintf("a call of the same tool with %s, text similarity %.3f and probability %.3f of the same request (≥ %.2f), was made %s", what, cd.cosine, cd.prob, c.dup, where(c, cd.e))
			}
			if !c.call.HasText() {
				reason = fmt.Sprintf("a call of the same tool with %s (and no text to compare) was made %s", what, where(c, cd.e))
			} else if !cd.probable && c.pol.OnDuplicate == ActionReplay && (c.pol.SemanticReplay == 0 || cd.score < c.pol.SemanticReplay) {
				// A replay may rest on free-text similarity only at or
				// above the policy's calibrated semantic_replay: a read is
				// free to run again, a wrong answer is not.
				c.res.Match = f.matchOf(c, cd, &got.Record)
				f.noteDiffers(c, cd)
				c.note("%s; a free-text match replays only at or above the policy's semantic_replay (%s): it executes", reason, replayBar(c.pol.SemanticReplay))
				c.res.Reason = "a free-text match is not certain enough to replay: it executes"
				return false, nil
			}
			f.noteDiffers(c, cd)
			c.res.Stage = StageSemantic
			return f.onDuplicate(ctx, c, got, cd, reason, cd.probable)
		}
		if ambiguous == nil {
			ambiguous = cd
			f.noteReadings(c, cd.e)
			f.noteDiffers(c, cd)
			c.res.Match = f.matchOf(c, cd, &got.Record)
			if done, err := f.judgeStage(ctx, bctx, c, cd, got); err != nil || done {
				return done, err
			}
		}
	}
	return false, nil
}

// replayBar says what the policy's semantic_replay is.
func replayBar(v float64) string {
	if v == 0 {
		return "not set"
	}
	return fmt.Sprintf("%.3f", v)
}

// noteDiffers names the words that weighed against a candidate the pair
// scorer scored ("differs: anachronism / mischievous"). They are argument
// text: for the caller, never the log.
func (f *Funnel) noteDiffers(c *check, cd *candidate) {
	if len(cd.differs) > 0 {
		c.note("differs: %s", strings.Join(cd.differs, "; "))
	}
}

// matchOf is the Match of a candidate: its record, its text similarity and
// the pair scorer's probability.
func (f *Funnel) matchOf(c *check, cd *candidate, r *ledger.Record) *Match {
	m := matchOf(r, cd.cosine)
	if f.scorer != nil && c.call.HasText() {
		m.Probability = cd.prob
	}
	return m
}

// grade grades the identity values of shaped calls against the call's and
// returns those the call restates (canon.Compare: Restated, none
// Different), keeping each one's comparison in c.restated. A call's
// identity leaves are read from its record once and kept in its entry.
func (f *Funnel) grade(ctx context.Context, c *check, s *session, shaped []*entry) ([]*entry, error) {
	if len(shaped) == 0 {
		return nil, nil
	}
	if c.leaves == nil {
		c.leaves = c.call.IdentityLeaves()
	}
	var out []*entry
	for _, e := range shaped {
		s.mu.Lock()
		leaves := e.leaves
		s.mu.Unlock()
		if leaves == nil {
			_, earlier, err := f.liveCall(ctx, c, e.key)
			if err != nil {
				return nil, err
			}
			if earlier == nil {
				continue
			}
			leaves = earlier.IdentityLeaves()
			s.mu.Lock()
			e.leaves = leaves
			s.resize(e)
			s.mu.Unlock()
		}
		cmp, ok := c.leaves.Restates(leaves, c.today)
		if !ok {
			continue
		}
		if c.restated == nil {
			c.restated = map[*entry]*canon.Comparison{}
		}
		// A copy, so that only a restated call's comparison goes to the
		// heap (taking cmp's address moved it there for every call).
		graded := cmp
		c.restated[e] = &graded
		out = append(out, e)
	}
	c.lap("grade")
	return out, nil
}

// probable reports whether e may only be asked about: the call restates
// its identity values, and the policy grades them.
func (f *Funnel) probable(c *check, e *entry) bool {
	return c.restated[e] != nil && c.pol.Identity != IdentityLenient
}

// noteReadings names, for a candidate whose identity values the call
// restates, each restated value and the reading that took it for the
// earlier one. The notes hold argument values: they go to the caller,
// never to the log.
func (f *Funnel) noteReadings(c *check, e *entry) {
	graded := c.restated[e]
	if graded == nil {
		return
	}
	for _, l := range graded.Leaves {
		if l.Grade == canon.Restated {
			c.note("identity restated (probable, %s): %s: %s", l.Rule, l.Path, l.Reading)
		}
	}
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
// (pairscore.Contrast), or "" when it does not; earlier is nil when the record's
// call could not be read.
func (f *Funnel) contrastWith(c *check, earlier *canon.Call) string {
	if !c.call.HasText() {
		return ""
	}
	if earlier == nil {
		return "an unreadable record" // cannot tell: the embedding alone must not decide
	}
	return pairscore.Contrast(c.call.TextView(), earlier.TextView())
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

// liveCall reads the live record of an earlier call (see live) and its
// call canonicalized again (see earlierCall); call is nil when the record
// is gone or cannot be read back.
func (f *Funnel) liveCall(ctx context.Context, c *check, key string) (got ledger.Claim, call *canon.Call, err error) {
	got, ok, err := f.live(ctx, c, key)
	if err != nil || !ok {
		return got, nil, err
	}
	return got, f.earlierCall(c, &got.Record), nil
}

// byScore orders candidates best first, keeping arrival order among equal
// scores.
func byScore(cands []candidate) {
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(b.score, a.score) })
}

// uncompared decides for a check whose candidates es (calls of the tool
// with equal identity fields, in arrival order) could not be compared, for
// the reason why; es is nil when the session's calls are not known yet.
// Only candidates whose effect counts matter: the newest TopK are read
// (any beyond count without being read). The policy's Uncompared fallback
// decides: confirm asks, execute lets the call go on to its claim; both
// say so.
func (f *Funnel) uncompared(ctx context.Context, c *check, es []*entry, why string) (bool, error) {
	var (
		newest *ledger.Record
		keys   []string
		counts int
	)
	for i := len(es) - 1; i >= 0; i-- {
		if len(es)-1-i >= f.cfg.TopK {
			counts += i + 1
			break
		}
		got, ok, err := f.live(ctx, c, es[i].key)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		if newest == nil {
			newest = &got.Record
		}
		keys = append(keys, es[i].key)
		counts++
	}
	if es != nil && counts == 0 {
		return false, nil // none of them counts: nothing was left uncompared
	}
	c.res.NotCompared = &NotCompared{Reason: why, Keys: keys}
	if strings.HasPrefix(why, "budget") {
		c.res.BudgetExceeded = true
	}
	var what string // what was left uncompared, and why
	if es == nil {
		what = why
	} else {
		what = fmt.Sprintf("%d earlier call(s) of this tool with equal identity fields", counts)
		if len(keys) > 0 {
			what += " (" + strings.Join(keys, ", ") + ")"
		}
		what += " could not be compared with this call (" + why + ")"
	}
	c.note("not compared: %s", what)
	if newest != nil {
		c.res.Match = matchOf(newest, 0)
	}
	if c.pol.uncompared() == FallbackConfirm {
		c.res.Decision, c.res.Stage = Confirm, StageSemantic
		c.res.Reason = what + ": confirm before executing"
		return true, nil
	}
	c.res.Reason = what + "; the policy executes"
	return false, nil
}
