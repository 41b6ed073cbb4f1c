package funnel

import (
	"context"
	"time"

	"github.com/idem-dev/idem/judge"
	"github.com/idem-dev/idem/ledger"
)

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
