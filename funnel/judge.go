package funnel

import (
	"context"
	"fmt"
	"time"

	"github.com/idem-dev/idem/judge"
	"github.com/idem-dev/idem/ledger"
)

// judgeStage asks the judge about an ambiguous candidate, or about a
// probable one (its identity values restated: see probable), whatever its
// similarity. A probable candidate at or above the duplicate threshold
// that the judge cannot answer for is asked about (confirm), whatever the
// policy's fallback.
func (f *Funnel) judgeStage(ctx, bctx context.Context, c *check, cd *candidate, got ledger.Claim) (bool, error) {
	ask := cd.probable && cd.score >= c.dup
	fallback := func(budget string) (bool, error) {
		if ask {
			if budget != "" {
				c.res.BudgetExceeded = true
				c.note("%s", budget)
			}
			c.res.Stage = StageSemantic
			return f.onDuplicate(ctx, c, got, cd, fmt.Sprintf("a call of the same tool whose identity values this call restates, with text similarity %.3f, was made %s (the judge could not answer)", cd.cosine, where(c, cd.e)), true)
		}
		return f.fallbackFor(ctx, c, got, cd, budget)
	}
	if f.judge == nil || !c.pol.Judge {
		c.note("similarity %.3f is in the ambiguous band and no judge is configured", cd.score)
		return fallback("")
	}
	remain := time.Until(c.deadline) - f.cfg.JudgeReserve
	if remain <= 0 {
		return fallback("the budget ran out before the judge could be asked")
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
			return fallback("the judge did not answer within the budget")
		}
		c.note("judge error: %v", err)
		return fallback("")
	}
	c.res.Judge = &Verdict{Duplicate: v.Duplicate, Confidence: v.Confidence, Reason: v.Reason}
	if v.Duplicate {
		c.res.Stage = StageJudge
		return f.onDuplicate(ctx, c, got, cd, "the judge found it repeats an earlier call: "+v.Reason, cd.probable)
	}
	return false, nil
}

// onDuplicate applies the policy's action to a semantic or judged
// duplicate. A probable one (identity values restated, not certain) may
// only be asked about: confirm, whatever the policy.
func (f *Funnel) onDuplicate(ctx context.Context, c *check, got ledger.Claim, cd *candidate, reason string, probable bool) (bool, error) {
	action := c.pol.OnDuplicate
	if probable {
		action = ActionConfirm
	}
	switch action {
	case ActionReplay:
		err := f.replay(ctx, c, got, cd.cosine, reason)
		if c.res.Match != nil && c.res.Match.Key == got.Record.Key {
			c.res.Match = f.matchOf(c, cd, &got.Record)
		}
		return true, err
	case ActionConfirm:
		c.res.Decision, c.res.Match = Confirm, f.matchOf(c, cd, &got.Record)
		c.res.Reason = reason + ": confirm before executing"
		return true, nil
	default: // Warn
		c.res.Match = f.matchOf(c, cd, &got.Record)
		c.note("warn: %s", reason)
		return false, nil
	}
}

// fallbackFor applies the policy's fallback to an undecided candidate.
func (f *Funnel) fallbackFor(ctx context.Context, c *check, got ledger.Claim, cd *candidate, budget string) (bool, error) {
	return f.fallback(ctx, c, f.matchOf(c, cd, &got.Record), budget)
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
