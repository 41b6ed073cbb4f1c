package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/idem-dev/idem/ledger"
)

// Errors Guard returns, inside a *FlaggedError, when the call must not
// run now. Match them with errors.Is; show Error() to the model.
var (
	// ErrConfirm: a call very like this one already ran; ask before
	// running it again.
	ErrConfirm = errors.New("idem: a very similar call already ran")
	// ErrUncertain: an earlier execution of this call lost its lease
	// without a result; the effect may or may not have happened.
	ErrUncertain = errors.New("idem: an earlier execution of this call may or may not have taken effect")
	// ErrInProgress: the same call stayed in progress through every wait.
	ErrInProgress = errors.New("idem: the same call is still being executed")
	// ErrFailedBefore: the call already failed permanently; Match.Error is
	// its recorded error.
	ErrFailedBefore = errors.New("idem: this call already failed permanently")
	// ErrNotRecorded: fn ran but its outcome could not be recorded; the
	// result is returned with it.
	ErrNotRecorded = errors.New("idem: the call ran but its outcome was not recorded")
	// ErrLeaseLost: the running call's lease could not be kept: a renewal
	// was refused (the key was taken over or forgotten, or has been held
	// for the server's max_lease), or the lease ran out before a renewal
	// got through. Guard cancels fn's context with it as the cause
	// (context.Cause): another execution may start once the lease is gone.
	ErrLeaseLost = errors.New("idem: the call's lease was lost")
)

// FlaggedError is Guard's answer when the call was not run: the decision
// and why, worded for the model.
type FlaggedError struct {
	Result *Result // the check's answer: Decision, Reason, Match, Key
	err    error
}

func (e *FlaggedError) Error() string {
	msg := fmt.Sprintf("%v: %s", e.err, e.Result.Reason)
	if m := e.Result.Match; m != nil && m.Key != "" {
		msg += fmt.Sprintf(" (earlier call %q, %s", m.Key, m.Status)
		if m.Similarity > 0 && m.Similarity < 1 {
			msg += fmt.Sprintf(", similarity %.2f", m.Similarity)
		}
		msg += ")"
	}
	switch {
	case errors.Is(e.err, ErrConfirm):
		msg += ". The call was not run. If it is really a different action, make the same call again with confirmed set to "
		if m := e.Result.Match; m != nil && m.Key != "" {
			msg += strconv.Quote(m.Key)
		} else {
			msg += "the earlier call's key"
		}
		msg += " (CheckRequest.Confirmed)."
	case errors.Is(e.err, ErrUncertain):
		msg += ". The call was not run. Check whether the effect happened before retrying; key " + e.Result.Key + "."
	case errors.Is(e.err, ErrFailedBefore) && e.Result.Match != nil:
		msg += ". Its error was: " + string(e.Result.Match.Error)
	}
	return msg
}

func (e *FlaggedError) Unwrap() error { return e.err }

// Permanent marks err as a failure that will happen again: Guard records
// it as permanent, and later checks of the key replay it.
func Permanent(err error) error { return classified{err, ledger.ClassPermanent} }

// Transient marks err as a failure that may not happen again: Guard
// records it as transient, and the key may run again.
func Transient(err error) error { return classified{err, ledger.ClassTransient} }

type classified struct {
	error
	class ledger.ErrorClass
}

func (c classified) Unwrap() error                 { return c.error }
func (c classified) ErrorClass() ledger.ErrorClass { return c.class }

// recordTimeout bounds recording an outcome after fn has run; it is not
// cut short by the caller's ctx, since the effect has happened.
const recordTimeout = 10 * time.Second

// Guard runs one side-effecting call at most once:
//
//   - execute: it runs fn with the call's key (pass it downstream), then
//     records fn's result (Complete) or error (Fail). While fn runs, Guard
//     renews the lease every third of it, so a call that runs longer than
//     its lease keeps its key; if a renewal is refused, or the lease runs
//     out before one gets through, fn's context is cancelled with the
//     cause ErrLeaseLost. The error's class
//     is ledger.ClassifyError's: an error marked with Permanent or
//     Transient, or carrying an HTTP status (a StatusCode() int method:
//     400, 401, 403, 404, 409, 422 are permanent; 408, 429, 5xx
//     transient), else transient. fn's error is returned as it is.
//   - duplicate: fn does not run; the earlier call's recorded result is
//     returned (or, for a permanent failure, a *FlaggedError matching
//     ErrFailedBefore).
//   - in_progress: the server waits (Config.Wait) for the twin in flight
//     and Guard checks again, up to Config.MaxInProgress times, then
//     returns a *FlaggedError matching ErrInProgress.
//   - confirm, uncertain: fn does not run; a *FlaggedError matching
//     ErrConfirm or ErrUncertain says why, for the model.
//
// req.WaitMS, when zero, is set from Config.Wait.
func (c *Client) Guard(ctx context.Context, req CheckRequest, fn func(ctx context.Context, key string) (json.RawMessage, error)) (json.RawMessage, error) {
	if req.WaitMS == 0 {
		req.WaitMS = c.cfg.Wait.Milliseconds()
	}
	var res *Result
	for range c.cfg.MaxInProgress {
		var err error
		if res, err = c.Check(ctx, req); err != nil {
			return nil, err
		}
		if res.Decision != InProgress {
			break
		}
	}
	switch res.Decision {
	case Execute:
		return c.execute(ctx, res, fn)
	case Duplicate:
		if res.Match != nil && res.Match.Status == "FAILED" {
			return nil, &FlaggedError{Result: res, err: ErrFailedBefore}
		}
		if res.Match == nil || res.Match.Result == nil {
			return json.RawMessage("null"), nil
		}
		return res.Match.Result, nil
	case InProgress:
		return nil, &FlaggedError{Result: res, err: ErrInProgress}
	case Confirm:
		return nil, &FlaggedError{Result: res, err: ErrConfirm}
	case Uncertain:
		return nil, &FlaggedError{Result: res, err: ErrUncertain}
	}
	return nil, fmt.Errorf("idem: unknown decision %q", res.Decision)
}

func (c *Client) execute(ctx context.Context, res *Result, fn func(ctx context.Context, key string) (json.RawMessage, error)) (json.RawMessage, error) {
	fctx, lost := context.WithCancelCause(ctx)
	defer lost(nil)
	lctx, stop := context.WithCancel(ctx) // the renewals' own: they end when fn does
	var wg sync.WaitGroup
	wg.Go(func() { c.keepLease(lctx, res, lost) })
	out, ferr := fn(fctx, res.Key)
	stop()
	wg.Wait()
	if cause := context.Cause(fctx); ferr != nil && errors.Is(cause, ErrLeaseLost) {
		ferr = fmt.Errorf("%w (%w)", ferr, cause)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if ferr != nil {
		class := ledger.ClassifyError(ferr)
		errJSON, _ := json.Marshal(struct {
			Error string `json:"error"`
			Class string `json:"class"`
		}{ferr.Error(), class.String()})
		if _, err := c.Fail(rctx, res.Key, res.Token, errJSON, class != ledger.ClassPermanent); err != nil {
			return nil, errors.Join(ferr, fmt.Errorf("%w: %w", ErrNotRecorded, err))
		}
		return nil, ferr
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	if !json.Valid(out) {
		return out, fmt.Errorf("%w: fn's result is not valid JSON", ErrNotRecorded)
	}
	if _, err := c.Complete(rctx, res.Key, res.Token, out); err != nil {
		return out, fmt.Errorf("%w: %w", ErrNotRecorded, err)
	}
	return out, nil
}

// keepLease renews res's lease every third of it until ctx ends; when a
// renewal is refused, or the lease runs out before one got through, it
// cancels the call with ErrLeaseLost. Times are by c's clock, lease
// lengths by the server's (Result.lease): the lease is taken to end a
// second before it does by the server's reckoning, for the Date header's
// rounding.
func (c *Client) keepLease(ctx context.Context, res *Result, lost context.CancelCauseFunc) {
	clock := c.cfg.Clock
	start := clock.Now()
	lease := res.lease
	if lease <= 0 {
		lease = res.LeaseUntil.Sub(start)
	}
	if lease <= 0 {
		return // no lease to keep: nothing the server said
	}
	every := lease / 3
	end := start.Add(lease - time.Second)
	for {
		wait := min(every, end.Sub(clock.Now()))
		if wait <= 0 {
			lost(fmt.Errorf("%w: it ran out before a renewal got through", ErrLeaseLost))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-clock.After(wait):
		}
		sent := clock.Now()
		if !sent.Before(end) {
			lost(fmt.Errorf("%w: it ran out before a renewal got through", ErrLeaseLost))
			return
		}
		rec, h, err := c.renew(ctx, res.Key, res.Token, lease)
		if ae, ok := errors.AsType[*APIError](err); ok && ae.Status >= 400 && ae.Status < 500 {
			lost(fmt.Errorf("%w: renewal refused: %w", ErrLeaseLost, err))
			return
		}
		if err != nil {
			continue // unreachable or busy: again at the next tick, while the lease lasts
		}
		until := time.UnixMilli(rec.LeaseUntil)
		granted := leaseOf(h, until)
		if granted <= 0 {
			granted = until.Sub(sent)
		}
		end = sent.Add(granted - time.Second)
	}
}
