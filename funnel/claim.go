package funnel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/idem-dev/idem/ledger"
)

// maxFenceRounds bounds how often a claim looks at the session again after
// it moved on under it (see claim).
const maxFenceRounds = 8

// claim claims the key for execution. Under the session's lock it first
// compares the call with the calls claimed in the session since this check
// looked, so that two checks of one session racing each other in this
// process cannot both execute the same effect: a byte-identical late call
// is answered under the lock; a late call that passes the identity gate
// is compared outside it (embedding the call if it was not embedded yet),
// then the claim looks again.
//
// Other replicas do not take this lock, so the claim is fenced on the
// newest session Seq the call was compared with: if a call of another
// replica took a number since, the ledger refuses the claim
// (ledger.ErrSessionMoved, nothing written), and the claim refreshes the
// view, compares the call with what arrived, and tries again, at most
// maxFenceRounds times in all; then the error goes to the caller, who may
// retry. A check that could not look at the session (its view was still
// loading, and the policy executes uncompared calls) claims unfenced.
func (f *Funnel) claim(ctx context.Context, c *check) error {
	s := f.sessions.get(c.scope)
	var moved *ledger.SessionMovedError // the last refusal, told to the view after its refresh
	for round := 1; ; round++ {
		if round > maxFenceRounds {
			f.log.WarnContext(ctx, "funnel: the session kept moving under the claim", "tenant", c.req.Tenant, "key", c.key, "rounds", round-1)
			return fmt.Errorf("funnel: claim %q: %w", c.key, ledger.ErrSessionMoved)
		}
		s.mu.Lock()
		req := f.claimRequest(c)
		if c.pol.Semantic && c.looked {
			done, again, err := f.lateLook(ctx, c, s, moved)
			moved = nil // told to the view
			if err != nil || done {
				s.mu.Unlock()
				return err
			}
			if again { // compared late calls outside the lock: look again
				continue
			}
			req.Fenced, req.SessionSeen = c.req.Session != "", s.covered
		}
		start := time.Now()
		got, err := f.ledger.Claim(ctx, req)
		c.res.TimingsUS["claim"] += time.Since(start).Microseconds()
		c.mark = time.Now()
		if m, ok := errors.AsType[*ledger.SessionMovedError](err); ok {
			s.mu.Unlock()
			moved = m
			continue
		}
		if err != nil {
			s.mu.Unlock()
			return err
		}
		if round > 1 {
			c.note("the session moved on during the claim; compared again %d times", round-1)
		}
		if got.Outcome != ledger.Claimed {
			// Another check of this key won the race.
			_, err := f.decideKey(ctx, c, got, false)
			s.mu.Unlock()
			return err
		}
		f.granted(c, s, &got)
		if req.Fenced {
			s.claimed(got.Record.Seq)
		}
		s.mu.Unlock()
		return nil
	}
}

// lateLook brings the view up to date and compares the call with the calls
// that arrived since the check looked. The caller holds s.mu. It reports
// done when a late call decided (under the lock: an identical call's
// record is answered as it stands, without waiting for it, which would
// hold up the session), and again when late calls that pass the identity
// gate were compared: it has then released s.mu, and the claim must look
// once more.
func (f *Funnel) lateLook(ctx context.Context, c *check, s *session, moved *ledger.SessionMovedError) (done, again bool, err error) {
	if moved != nil && moved.Last < s.lastSeq {
		f.log.WarnContext(ctx, "funnel: session numbering restarted; reloading its view", "tenant", c.req.Tenant)
		s.reset()
		s.loaded = true // the refresh below lists it all
		c.seenSeq = 0
	}
	if err := f.refresh(ctx, s, c.req.Tenant, c.req.Session); err != nil {
		return false, false, err
	}
	if moved != nil {
		// Listed after the refusal: the view holds every live record
		// numbered up to where the counter stood.
		s.covered = max(s.covered, moved.Last)
	}
	late := slices.Clone(s.Since(c.seenSeq))
	c.seenSeq = s.Newest()
	if len(late) == 0 {
		return false, false, nil
	}
	var exact []*entry
	for _, e := range late {
		if e.hash == c.call.Hash {
			exact = append(exact, e)
		}
	}
	c.locked = true
	done, err = f.exactStage(ctx, c, exact)
	c.locked = false
	if err != nil || done {
		return done, false, err
	}
	gated, shaped, held := f.split(c, late)
	if len(gated) == 0 && len(shaped) == 0 && len(held) == 0 {
		return false, false, nil
	}
	s.mu.Unlock()
	bctx, cancel := context.WithDeadline(ctx, c.deadline)
	defer cancel()
	done, err = f.semantic(ctx, bctx, c, s, gated, shaped, held)
	if err != nil || done {
		s.mu.Lock() // the caller unlocks
		return done, false, err
	}
	return false, true, nil
}

// claimRequest is the claim of the call, with its embedding when it is
// there.
func (f *Funnel) claimRequest(c *check) ledger.ClaimRequest {
	req := ledger.ClaimRequest{
		Tenant: c.req.Tenant, Key: c.key, Session: c.req.Session, Workflow: c.req.Workflow,
		Step: c.req.Step, Tool: c.req.Tool, Canonical: c.call.Canonical, Hash: c.call.Hash,
		Identity: c.call.IdentityDigest, Attempt: c.req.Attempt.Number, Lease: c.pol.Lease,
		Confirmed: c.req.Confirmed,
	}
	if c.fl != nil {
		if w := c.fl.ready(); w != nil {
			req.Embedding, req.EmbeddingModel = slices.Concat(w...), f.model
		}
	}
	return req
}

// granted fills in an execute and records the new entry in the session.
// A call with text whose embedding did not come with the claim is embedded
// now, in the background, and its embedding written to its record. The
// caller holds s.mu.
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
	if c.req.Confirmed != "" {
		c.note("confirmed as another action than the earlier call %s: not compared with it", c.req.Confirmed)
		f.log.Info("funnel: a call confirmed as another action executes", "tenant", c.req.Tenant, "key", c.key, "confirmed", c.req.Confirmed)
	}
	if !c.pol.Semantic {
		return
	}
	e := entryOf(&got.Record, f.model, f.dim)
	e.shape, e.read = c.call.ShapeDigest, true
	// The leaves graded against the session's calls of this shape: the
	// next call of the shape grades this one with them, instead of
	// reading its record back.
	e.leaves = c.leaves
	e = s.add(e)
	f.joinScope(c, s, e) // before the embedding is kept: it joins the scope when it lands
	switch {
	case !c.call.HasText():
		e.text = textNone
	case e.qv != nil || f.enc == nil:
		e.text = textSome
	case c.fl != nil:
		f.keep(s, c.req.Tenant, e, c.fl, c.call.TextView(), 1)
	default:
		e.text = textSome
		if _, err := f.embedEntry(s, c.req.Tenant, e, c.call.TextView(), false, time.Time{}); err != nil {
			// The record stays without its embedding: a check that
			// needs it computes it.
			f.log.WarnContext(context.Background(), "funnel: queueing a claimed call's embedding", "tenant", c.req.Tenant, "key", e.key, "err", err)
		}
	}
}
