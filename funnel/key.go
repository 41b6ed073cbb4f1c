package funnel

import (
	"context"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/ledger"
)

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

// takeover claims an uncertain key anew.
func (f *Funnel) takeover(ctx context.Context, c *check) error {
	req := ledger.ClaimRequest{
		Tenant: c.req.Tenant, Key: c.key, Session: c.req.Session, Workflow: c.req.Workflow,
		Step: c.req.Step, Tool: c.req.Tool, Canonical: c.call.Canonical, Hash: c.call.Hash,
		Identity: c.call.IdentityDigest, Attempt: c.req.Attempt.Number, Lease: c.pol.Lease,
		Confirmed: c.req.Confirmed,
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
