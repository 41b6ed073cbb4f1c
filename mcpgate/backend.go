package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/client"
	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/ledger"
)

// Backend is the idem that decides the gateway's calls: an in-process
// funnel and ledger (Local) or a shared idem server (Remote). Requests and
// answers have the shapes of the HTTP API (package client).
type Backend interface {
	Check(ctx context.Context, req client.CheckRequest) (*client.Result, error)
	Complete(ctx context.Context, key, token string, result json.RawMessage) error
	Fail(ctx context.Context, key, token string, errJSON json.RawMessage, transient bool) error
	// Renew extends the lease of the execution holding token by lease from
	// now and returns when it now ends.
	Renew(ctx context.Context, key, token string, lease time.Duration) (time.Time, error)
	// SetTools hands the backend the upstream's tool definitions: their
	// schemas decide field classes, their annotations policies.
	SetTools(defs []canon.Tool) error
}

// ErrConfirmedUnsupported: the backend does not know the check's
// confirmed field yet, so a confirmation cannot be passed on.
var ErrConfirmedUnsupported = errors.New("mcpgate: this idem does not accept a confirmation (confirmed) yet")

// Local decides in this process: a funnel over a ledger. It is safe for
// concurrent use; SetTools swaps the funnel while checks run.
type Local struct {
	ledger    *ledger.Ledger
	tenant    string
	newFunnel func([]canon.Tool) (*funnel.Funnel, error)
	f         atomic.Pointer[funnel.Funnel]
	mu        sync.Mutex     // serializes SetTools
	retired   sync.WaitGroup // funnels replaced by SetTools, being closed
}

// NewLocal returns a Local for tenant over l; newFunnel builds the funnel
// for a set of tool definitions (called now with none, and again by
// SetTools).
func NewLocal(l *ledger.Ledger, tenant string, newFunnel func([]canon.Tool) (*funnel.Funnel, error)) (*Local, error) {
	if l == nil || newFunnel == nil || tenant == "" {
		return nil, errors.New("mcpgate: NewLocal needs a ledger, a tenant and newFunnel")
	}
	f, err := newFunnel(nil)
	if err != nil {
		return nil, err
	}
	lb := &Local{ledger: l, tenant: tenant, newFunnel: newFunnel}
	lb.f.Store(f)
	return lb, nil
}

// SetTools builds a funnel that knows defs and makes it the one checks
// use. Session views are rebuilt from the ledger by the new funnel.
func (b *Local) SetTools(defs []canon.Tool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, err := b.newFunnel(defs)
	if err != nil {
		return err
	}
	old := b.f.Swap(f)
	// Checks that began on the old funnel finish on it; then it writes
	// what it embedded in the background and stops.
	b.retired.Add(1)
	go func() {
		defer b.retired.Done()
		ctx, cancel := context.WithTimeout(context.Background(), retireTimeout)
		defer cancel()
		old.Settle(ctx)
		old.Close(ctx)
	}()
	return nil
}

// retireTimeout bounds how long a replaced funnel is given to finish.
const retireTimeout = 30 * time.Second

// Close stops the funnel in use and waits for the replaced ones, until
// ctx ends.
func (b *Local) Close(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.f.Load()
	f.Settle(ctx)
	err := f.Close(ctx)
	done := make(chan struct{})
	go func() { b.retired.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return errors.Join(err, ctx.Err())
	}
	return err
}

// Check runs the funnel.
func (b *Local) Check(ctx context.Context, req client.CheckRequest) (*client.Result, error) {
	fr := funnel.Request{
		Tenant: b.tenant, Session: req.SessionID, Workflow: req.WorkflowID, Step: req.StepID,
		Key: req.IdempotencyKey, Tool: req.Tool, Arguments: req.Arguments,
		Wait: time.Duration(req.WaitMS) * time.Millisecond, Takeover: req.Takeover,
		Confirmed: req.Confirmed,
	}
	if req.ReferenceTime != "" {
		d, err := canon.ParseReference(req.ReferenceTime)
		if err != nil {
			return nil, fmt.Errorf("reference_time: %w", err)
		}
		fr.Today = d
	}
	res, err := b.f.Load().Check(ctx, fr)
	if err != nil {
		return nil, err
	}
	return fromFunnel(&res), nil
}

func fromFunnel(r *funnel.Result) *client.Result {
	out := &client.Result{
		Decision: string(r.Decision), Stage: string(r.Stage), Key: r.Key, Token: r.Token,
		LeaseUntil: r.LeaseUntil, Policy: r.Policy, Reason: r.Reason, BudgetExceeded: r.BudgetExceeded,
		Notes: r.Notes, ReferenceDate: r.ReferenceDate, TimingsUS: r.TimingsUS,
		Hash: canon.HashHex(r.Hash), IdentityDigest: canon.HashHex(r.IdentityDigest),
		Replayed: r.Decision == funnel.Duplicate,
	}
	if m := r.Match; m != nil {
		out.Match = &client.Match{
			Key: m.Key, Tool: m.Tool, WorkflowID: m.Workflow, StepID: m.Step, Status: m.Status,
			Result: m.Result, Error: m.Error, ErrorClass: m.ErrorClass, Similarity: m.Similarity, CreatedAt: m.CreatedAt,
		}
	}
	if v := r.Judge; v != nil {
		out.Judge = &client.Verdict{Duplicate: v.Duplicate, Confidence: v.Confidence, Reason: v.Reason}
	}
	return out
}

// Complete records result under key.
func (b *Local) Complete(ctx context.Context, key, token string, result json.RawMessage) error {
	_, err := b.ledger.Complete(ctx, b.tenant, key, token, result)
	return err
}

// Renew extends the lease under key held by token (ledger.Ledger.Renew).
func (b *Local) Renew(ctx context.Context, key, token string, lease time.Duration) (time.Time, error) {
	rec, err := b.ledger.Renew(ctx, b.tenant, key, token, lease)
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(rec.LeaseUntil), nil
}

// Fail records errJSON as the key's failure.
func (b *Local) Fail(ctx context.Context, key, token string, errJSON json.RawMessage, transient bool) error {
	class := ledger.ClassPermanent
	if transient {
		class = ledger.ClassTransient
	}
	_, err := b.ledger.Fail(ctx, b.tenant, key, token, errJSON, class)
	return err
}

// Remote decides on a shared idem server through the Go client. The
// server's own configuration (tools.file, tools.rules, policies) decides
// field classes and policies: the API has no way to hand it the
// upstream's tool definitions, so SetTools does nothing.
type Remote struct {
	c *client.Client
}

// NewRemote returns a Remote over c.
func NewRemote(c *client.Client) *Remote { return &Remote{c: c} }

// Check asks the server. A server that does not know the confirmed field
// answers 400 naming it: that is ErrConfirmedUnsupported.
func (b *Remote) Check(ctx context.Context, req client.CheckRequest) (*client.Result, error) {
	res, err := b.c.Check(ctx, req)
	if ae, ok := errors.AsType[*client.APIError](err); ok && req.Confirmed != "" &&
		ae.Status == http.StatusBadRequest && ae.Field == "confirmed" {
		return nil, fmt.Errorf("%w: %w", ErrConfirmedUnsupported, err)
	}
	return res, err
}

// Complete records result on the server.
func (b *Remote) Complete(ctx context.Context, key, token string, result json.RawMessage) error {
	_, err := b.c.Complete(ctx, key, token, result)
	return err
}

// Fail records errJSON on the server.
func (b *Remote) Fail(ctx context.Context, key, token string, errJSON json.RawMessage, transient bool) error {
	_, err := b.c.Fail(ctx, key, token, errJSON, transient)
	return err
}

// SetTools does nothing: the server's configuration decides.
func (b *Remote) SetTools([]canon.Tool) error { return nil }

// Renew extends the lease through the server's /v1/renew.
func (b *Remote) Renew(ctx context.Context, key, token string, lease time.Duration) (time.Time, error) {
	rec, err := b.c.Renew(ctx, key, token, lease)
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(rec.LeaseUntil), nil
}
