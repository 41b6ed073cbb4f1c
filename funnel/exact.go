package funnel

import (
	"context"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/ledger"
)

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
