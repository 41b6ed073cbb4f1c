package mcpgate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/idem-dev/idem/client"
	"github.com/idem-dev/idem/ledger"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The reserved names the gateway reads in a tools/call.
const (
	// ConfirmArgument is the argument a model adds to run a call idem
	// flagged: its value is the key the flag named. The gateway removes it
	// before the call is checked or forwarded.
	ConfirmArgument = "idem_confirmed"
	// metaKey is the client's idempotency key in the request's _meta.
	metaKey = "idempotencyKey"
	// metaConfirmed is ConfirmArgument's counterpart in _meta, for clients
	// that confirm in code.
	metaConfirmed = "idem/confirmed"
)

// recordTimeout bounds recording an outcome; it is not cut short by the
// call's cancellation, since the effect may have happened.
const recordTimeout = 10 * time.Second

// toolCall is one tools/call as the gateway reads it.
type toolCall struct {
	req       *jsonrpc.Request // as the client sent it
	fwd       *jsonrpc.Request // as it goes upstream (the reserved argument removed)
	tool      string
	args      json.RawMessage // a JSON object
	key       string          // the client's idempotency key, if any
	confirmed string          // the key the model confirmed, if any
	readOnly  bool
}

// parseCall reads a tools/call's params.
func parseCall(req *jsonrpc.Request) (*toolCall, error) {
	var params map[string]json.RawMessage
	if err := json.Unmarshal(req.Params, &params); err != nil || params == nil {
		return nil, errors.New("params: want a JSON object with name and arguments")
	}
	tc := &toolCall{req: req, fwd: req}
	if err := json.Unmarshal(params["name"], &tc.tool); err != nil || tc.tool == "" {
		return nil, errors.New("params.name: want the tool's name")
	}
	tc.args = params["arguments"]
	if isNull(tc.args) {
		tc.args = json.RawMessage(`{}`)
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(tc.args, &args); err != nil || args == nil {
		return nil, errors.New("params.arguments: want a JSON object")
	}
	if m := params["_meta"]; !isNull(m) {
		var meta map[string]json.RawMessage
		if err := json.Unmarshal(m, &meta); err != nil {
			return nil, errors.New("params._meta: want a JSON object")
		}
		if v, ok := meta[metaKey]; ok && json.Unmarshal(v, &tc.key) != nil {
			return nil, errors.New("params._meta." + metaKey + ": want a string")
		}
		if v, ok := meta[metaConfirmed]; ok && json.Unmarshal(v, &tc.confirmed) != nil {
			return nil, errors.New("params._meta." + metaConfirmed + ": want a string")
		}
	}
	v, ok := args[ConfirmArgument]
	if !ok {
		return tc, nil
	}
	if err := json.Unmarshal(v, &tc.confirmed); err != nil {
		return nil, fmt.Errorf("params.arguments.%s: want the key idem named, a string", ConfirmArgument)
	}
	delete(args, ConfirmArgument)
	var err error
	if tc.args, err = marshal(args); err != nil {
		return nil, err
	}
	params["arguments"] = tc.args
	fp, err := marshal(params)
	if err != nil {
		return nil, err
	}
	tc.fwd = &jsonrpc.Request{ID: req.ID, Method: req.Method, Params: fp, Extra: req.Extra}
	return tc, nil
}

// marshal encodes v without escaping <, > and &.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// call checks one tools/call and answers it.
func (s *session) call(ctx context.Context, req *jsonrpc.Request) {
	g := s.g
	tc, err := parseCall(req)
	if err != nil {
		s.toClient(ctx, &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "idem mcp: " + err.Error()}})
		return
	}
	s.ensureTools()
	tc.readOnly = g.tools.readOnly(tc.tool)
	cr := client.CheckRequest{SessionID: s.id, Tool: tc.tool, Arguments: tc.args}
	if tc.key != "" {
		cr.IdempotencyKey = tc.key
	} else {
		cr.WorkflowID, cr.StepID = s.id, strconv.FormatInt(s.steps.Add(1), 10)
	}
	if tc.confirmed != "" {
		if tc.confirmed == tc.key {
			cr.Takeover = true // the call's own key was uncertain: take it over
		} else {
			cr.Confirmed = tc.confirmed
		}
	}
	res, err := g.backend.Check(ctx, cr)
	if err == nil && res.Decision == client.InProgress && g.cfg.Wait > 0 && !g.isLost(res.Key, matchKey(res)) {
		cr.WaitMS = g.cfg.Wait.Milliseconds() // a twin is running: wait for its outcome
		res, err = g.backend.Check(ctx, cr)
	}
	if err != nil {
		s.checkFailed(ctx, tc, err)
		return
	}
	g.log.Debug("tools/call checked", "session", s.id, "tool", tc.tool, "key", res.Key,
		"decision", res.Decision, "stage", res.Stage, "match", matchKey(res))
	switch res.Decision {
	case client.Execute:
		s.execute(ctx, tc, res)
	case client.Duplicate:
		s.duplicate(ctx, tc, res)
	case client.InProgress:
		if k := matchKey(res); g.isLost(res.Key, k) {
			s.flag(ctx, tc, res, "uncertain", uncertainText(tc.tool, lostKey(g, res), true))
			return
		}
		s.flag(ctx, tc, res, res.Decision, inProgressText(tc.tool, matchKey(res)))
	case client.Confirm:
		s.flag(ctx, tc, res, res.Decision, confirmText(tc.tool, res))
	case client.Uncertain:
		s.flag(ctx, tc, res, res.Decision, uncertainText(tc.tool, matchKey(res), false))
	default:
		s.toolError(ctx, tc, nil, fmt.Sprintf("idem answered %q, which this gateway does not know; the call of %s was not run.", res.Decision, tc.tool))
	}
}

// matchKey is the key of the record a decision refers to: its match, else
// the call's own key.
func matchKey(res *client.Result) string {
	if res.Match != nil && res.Match.Key != "" {
		return res.Match.Key
	}
	return res.Key
}

func lostKey(g *Gateway, res *client.Result) string {
	if k := matchKey(res); g.isLost(k) {
		return k
	}
	return res.Key
}

// checkFailed answers a call idem could not check. A read-only tool runs
// anyway (unrecorded: a read has no effect to repeat); anything else is
// not run.
func (s *session) checkFailed(ctx context.Context, tc *toolCall, err error) {
	if ctx.Err() != nil {
		return // the client cancelled the call, or the session ended
	}
	switch {
	case errors.Is(err, ErrConfirmedUnsupported):
		s.toolError(ctx, tc, map[string]any{"idem/error": "confirmed_unsupported"}, confirmUnsupportedText(tc.tool))
	case tc.readOnly:
		s.g.log.Warn("check failed: forwarding a read-only call unrecorded", "session", s.id, "tool", tc.tool, "err", err)
		s.passthrough(ctx, tc)
	default:
		s.g.log.Warn("check failed: the call was not run", "session", s.id, "tool", tc.tool, "err", err)
		s.toolError(ctx, tc, map[string]any{"idem/error": "check_failed"},
			fmt.Sprintf("idem could not check this call of %s, so it was not run: %v", tc.tool, err))
	}
}

// execute forwards an executing call to the upstream, records its answer
// and relays it.
func (s *session) execute(ctx context.Context, tc *toolCall, res *client.Result) {
	g := s.g
	if !tc.readOnly {
		s.wrote(res.Key, false)
	}
	ch, err := s.up.start(ctx, tc.fwd)
	if err != nil {
		// It never reached the upstream: it did not run.
		s.record(res.Key, func(rctx context.Context) error {
			return g.backend.Fail(rctx, res.Key, res.Token, gateError(err), true)
		})
		if ctx.Err() == nil {
			s.toolError(ctx, tc, map[string]any{"idem/error": "upstream_unavailable"},
				fmt.Sprintf("idem mcp: the upstream server is not available (%v); the call of %s was not run.", err, tc.tool))
		}
		return
	}
	defer s.up.forget(tc.fwd.ID)
	stopRenewing := s.keepLease(res)
	defer stopRenewing()
	timer := time.NewTimer(g.cfg.CallTimeout)
	defer timer.Stop()
	select {
	case resp := <-ch:
		stopRenewing()
		s.finish(ctx, tc, res, resp, true)
	case <-timer.C:
		leaseUntil := stopRenewing()
		g.markLost(res.Key)
		s.cancelUpstream(tc.fwd.ID, "idem mcp: no answer within "+g.cfg.CallTimeout.String())
		s.toolError(ctx, tc, map[string]any{"idem/error": "upstream_timeout", "idem/key": res.Key}, timeoutText(tc.tool, g.cfg.CallTimeout, res.Key))
		// A late answer is still the truth: record it while the lease holds.
		until := leaseUntil.Sub(g.clock.Now())
		if leaseUntil.IsZero() || until <= 0 {
			until = g.cfg.CallTimeout
		}
		late := time.NewTimer(until)
		defer late.Stop()
		if resp := s.late(ch, late.C); resp != nil {
			s.finish(ctx, tc, res, resp, false)
		}
	case <-ctx.Done():
		// The client cancelled the call (the cancellation went upstream too)
		// or the session ended: no answer is expected, but one that comes
		// is recorded.
		g.markLost(res.Key)
		if resp := s.late(ch, timer.C); resp != nil {
			s.finish(ctx, tc, res, resp, false)
		}
	}
}

// keepLease renews the lease of res's execution every third of it while
// the upstream runs the call, so that a call running longer than its lease
// keeps its key: a twin is answered in_progress and waits, instead of
// uncertain, and the lease is not there to take over. The lease's length
// is the one the check granted (res.LeaseUntil from now, by the gateway's
// clock). A refused renewal (the lease was taken over, or reached the
// ledger's max_lease) ends the renewals; a failed one is tried again at
// the next tick. stop ends them and returns the lease's end as last
// granted (zero when there was none); it may be called more than once.
func (s *session) keepLease(res *client.Result) (stop func() time.Time) {
	g := s.g
	start := g.clock.Now()
	lease := res.LeaseUntil.Sub(start)
	if res.LeaseUntil.IsZero() || lease <= 0 || res.Token == "" {
		return func() time.Time { return res.LeaseUntil }
	}
	var mu sync.Mutex
	until := res.LeaseUntil
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-s.done:
				return
			case <-g.clock.After(lease / 3):
			}
			rctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
			next, err := g.backend.Renew(rctx, res.Key, res.Token, lease)
			cancel()
			switch {
			case err == nil:
				mu.Lock()
				until = next
				mu.Unlock()
			case refusedRenewal(err):
				g.log.Warn("the lease of a running call could not be renewed", "session", s.id, "key", res.Key, "err", err)
				return
			default:
				g.log.Warn("renewing a running call's lease failed; trying again", "session", s.id, "key", res.Key, "err", err)
			}
		}
	}()
	var once sync.Once
	return func() time.Time {
		once.Do(func() { close(quit); <-done })
		mu.Lock()
		defer mu.Unlock()
		return until
	}
}

// refusedRenewal: the ledger will not renew this lease again (taken over,
// finished, past max_lease), as opposed to a renewal that did not get
// through.
func refusedRenewal(err error) bool {
	if ae, ok := errors.AsType[*client.APIError](err); ok {
		return ae.Status >= 400 && ae.Status < 500
	}
	return errors.Is(err, ledger.ErrStaleToken) || errors.Is(err, ledger.ErrLeaseLimit) ||
		errors.Is(err, ledger.ErrNotPending) || errors.Is(err, ledger.ErrNotFound)
}

// late waits for an answer after the client was answered or gave up.
func (s *session) late(ch chan *jsonrpc.Response, until <-chan time.Time) *jsonrpc.Response {
	select {
	case resp := <-ch:
		return resp
	case <-until:
	case <-s.done:
	}
	return nil
}

func (s *session) cancelUpstream(id jsonrpc.ID, reason string) {
	params, _ := marshal(map[string]any{"requestId": id.Raw(), "reason": reason})
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	s.up.relay(ctx, &jsonrpc.Request{Method: "notifications/cancelled", Params: params}, false)
}

// finish records the upstream's answer to an executed call and, when
// reply, relays it to the client.
func (s *session) finish(ctx context.Context, tc *toolCall, res *client.Result, resp *jsonrpc.Response, reply bool) {
	g := s.g
	switch {
	case resp == nil:
		g.markLost(res.Key)
		if reply {
			s.toolError(ctx, tc, map[string]any{"idem/error": "upstream_lost", "idem/key": res.Key}, lostText(tc.tool, res.Key))
		}
		return
	case resp.Error != nil:
		we := wireError(resp.Error)
		errJSON, _ := marshal(map[string]any{"jsonrpc_error": we})
		class := classifyRPCError(we)
		if s.record(res.Key, func(rctx context.Context) error {
			return g.backend.Fail(rctx, res.Key, res.Token, errJSON, class != ledger.ClassPermanent)
		}) {
			g.lost.Remove(res.Key)
		}
	case needsInput(resp.Result):
		// The upstream asks the client for input first (multi round-trip
		// requests): the call has not happened yet. The client calls again
		// with its answers, and that call is checked afresh.
		s.record(res.Key, func(rctx context.Context) error {
			return g.backend.Fail(rctx, res.Key, res.Token, resp.Result, true)
		})
		g.lost.Remove(res.Key)
	default:
		shape, ok := readResult(resp.Result)
		if !ok {
			g.markLost(res.Key)
			g.log.Warn("the upstream's answer is not a tool result", "session", s.id, "tool", tc.tool, "key", res.Key)
			if reply {
				s.toolError(ctx, tc, map[string]any{"idem/error": "upstream_malformed", "idem/key": res.Key}, malformedText(tc.tool, res.Key))
			}
			return
		}
		var recorded bool
		if shape.IsError {
			class := classifyToolError(resp.Result)
			recorded = s.record(res.Key, func(rctx context.Context) error {
				return g.backend.Fail(rctx, res.Key, res.Token, resp.Result, class != ledger.ClassPermanent)
			})
		} else {
			recorded = s.record(res.Key, func(rctx context.Context) error {
				return g.backend.Complete(rctx, res.Key, res.Token, resp.Result)
			})
			if recorded && tc.readOnly {
				s.wrote(res.Key, true)
			}
		}
		if recorded {
			g.lost.Remove(res.Key)
		} else {
			g.markLost(res.Key) // it ran, and no record says so: a retry is uncertain
		}
	}
	if reply {
		s.toClient(ctx, &jsonrpc.Response{ID: tc.req.ID, Result: resp.Result, Error: resp.Error})
	}
}

// record runs one ledger write with its own deadline and reports whether
// it succeeded.
func (s *session) record(key string, write func(context.Context) error) bool {
	rctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	if err := write(rctx); err != nil {
		s.g.log.Error("recording a call's outcome", "session", s.id, "key", key, "err", err)
		return false
	}
	return true
}

// duplicate answers with the recorded outcome, without calling the
// upstream; a read whose record is older than the session's last write
// is forwarded again.
func (s *session) duplicate(ctx context.Context, tc *toolCall, res *client.Result) {
	m := res.Match
	if m == nil {
		s.toClient(ctx, &jsonrpc.Response{ID: tc.req.ID, Result: replayResult(nil, res)})
		return
	}
	if m.Status == "FAILED" {
		s.toClient(ctx, replayFailure(tc, res))
		return
	}
	if tc.readOnly && !s.isFresh(m.Key) {
		s.passthrough(ctx, tc)
		return
	}
	s.toClient(ctx, &jsonrpc.Response{ID: tc.req.ID, Result: replayResult(m.Result, res)})
}

// passthrough forwards a call without recording it and relays the answer.
func (s *session) passthrough(ctx context.Context, tc *toolCall) {
	ch, err := s.up.start(ctx, tc.fwd)
	if err != nil {
		s.toolError(ctx, tc, map[string]any{"idem/error": "upstream_unavailable"},
			fmt.Sprintf("idem mcp: the upstream server is not available (%v); the call of %s was not run.", err, tc.tool))
		return
	}
	defer s.up.forget(tc.fwd.ID)
	timer := time.NewTimer(s.g.cfg.CallTimeout)
	defer timer.Stop()
	select {
	case resp := <-ch:
		if resp == nil {
			s.toolError(ctx, tc, map[string]any{"idem/error": "upstream_lost"}, lostText(tc.tool, ""))
			return
		}
		s.toClient(ctx, &jsonrpc.Response{ID: tc.req.ID, Result: resp.Result, Error: resp.Error})
	case <-timer.C:
		s.cancelUpstream(tc.fwd.ID, "idem mcp: no answer within "+s.g.cfg.CallTimeout.String())
		s.toolError(ctx, tc, map[string]any{"idem/error": "upstream_timeout"}, timeoutText(tc.tool, s.g.cfg.CallTimeout, ""))
	case <-ctx.Done():
	}
}

// flag answers a call idem did not let run.
func (s *session) flag(ctx context.Context, tc *toolCall, res *client.Result, decision, text string) {
	meta := map[string]any{"idem/decision": decision, "idem/key": res.Key, "idem/stage": res.Stage}
	if m := res.Match; m != nil {
		meta["idem/match"] = m.Key
		if m.Similarity > 0 {
			meta["idem/similarity"] = m.Similarity
		}
	}
	s.toolError(ctx, tc, meta, text)
}

// toolError answers with a tool error result carrying text for the model.
func (s *session) toolError(ctx context.Context, tc *toolCall, meta map[string]any, text string) {
	s.toClient(ctx, &jsonrpc.Response{ID: tc.req.ID, Result: errorResult(text, meta)})
}

// gateError is the recorded error of a call the gateway could not send.
func gateError(err error) json.RawMessage {
	b, _ := marshal(map[string]string{"error": err.Error(), "class": ledger.ClassTransient.String()})
	return b
}
