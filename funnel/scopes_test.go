package funnel

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/index"
	"github.com/idem-dev/idem/ledger"
)

func settle(t testing.TB, f *Funnel) {
	t.Helper()
	if err := f.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func scoped(scope ScopeKind) []Policy {
	p := DefaultPolicy()
	p.Scope = scope
	return []Policy{p}
}

const (
	notify1 = `{"channel":"#ops","text":"The nightly deploy of the billing service finished; all checks are green."}`
	notify2 = `{"channel":"#ops","text":"The nightly deploy of the billing service has finished, and all checks are green."}`
)

// TestWiderScopesFindOtherSessions: a sub-agent in another session of the
// workflow (or of the tenant) re-sends a notification in other words:
// under a workflow or tenant scope it is asked about, naming the session
// that sent it; under the session scope it executes.
func TestWiderScopesFindOtherSessions(t *testing.T) {
	for _, tc := range []struct {
		scope ScopeKind
		want  Decision
	}{{ScopeWorkflow, Confirm}, {ScopeTenant, Confirm}, {ScopeSession, Execute}} {
		t.Run(string(tc.scope), func(t *testing.T) {
			e := newEnv(t, options{policies: scoped(tc.scope), scopes: true})
			e.run(t, Request{Session: "agent-a", Step: "1", Tool: "post_message", Arguments: []byte(notify1)}, `{"ts":"1"}`)
			settle(t, e.f) // agent-a's call joins the wide scope once it is embedded
			res := e.check(t, Request{Session: "agent-b", Step: "2", Tool: "post_message", Arguments: []byte(notify2)})
			if res.Decision != tc.want {
				t.Fatalf("%s at %s (%s), want %s", res.Decision, res.Stage, res.Reason, tc.want)
			}
			if tc.want == Confirm && (res.Match == nil || res.Match.Session != "agent-a" || res.Scope != string(tc.scope)) {
				t.Errorf("match %+v, scope %q: want agent-a's call in the %s scope", res.Match, res.Scope, tc.scope)
			}
			// Another channel is another effect, whatever the scope.
			want(t, e.check(t, Request{Session: "agent-c", Step: "3", Tool: "post_message",
				Arguments: []byte(`{"channel":"#billing","text":"Nightly billing service deploy is done and every check passed."}`)}), Execute, StageNew)
		})
	}
}

// TestTenantCacheAnswersReads: a read-only tool under a tenant scope (and
// a calibrated semantic_replay) is answered from any session's earlier
// read; tenants never see each other's.
func TestTenantCacheAnswersReads(t *testing.T) {
	pols := readPolicies(0.9)
	pols[0].Scope = ScopeTenant
	e := newEnv(t, options{policies: pols, scopes: true})
	first := `{"repo":"idem","query":"How do I rotate the API keys of a tenant?"}`
	e.run(t, Request{Session: "user-1", Step: "1", Tool: "search_docs", Arguments: []byte(first)}, `{"hits":["docs/operations.md"]}`)
	settle(t, e.f)
	res := e.check(t, Request{Session: "user-2", Step: "2", Tool: "search_docs", Arguments: []byte(`{"repo":"idem","query":"How can I rotate a tenant's API keys?"}`)})
	want(t, res, Duplicate, StageSemantic)
	if string(res.Match.Result) != `{"hits":["docs/operations.md"]}` || res.Scope != "tenant" || res.Match.Session != "user-1" {
		t.Errorf("replayed %s from %+v (scope %q)", res.Match.Result, res.Match, res.Scope)
	}
	want(t, e.check(t, Request{Session: "user-3", Step: "3", Tool: "search_docs", Arguments: []byte(first)}), Duplicate, StageExact)
	// Another tenant's reads are not its cache.
	want(t, e.check(t, Request{Tenant: "globex", Session: "user-1", Step: "4", Tool: "search_docs", Arguments: []byte(first)}), Execute, StageNew)
}

// TestWideScopeRebuiltAfterARestart: the wide scope is a cache of the
// ledger: a new funnel (a restart) rebuilds it and decides the same.
func TestWideScopeRebuiltAfterARestart(t *testing.T) {
	led := openStore(t, t.TempDir())
	a := newFunnel(t, led, time.Now, options{policies: scoped(ScopeTenant), scopes: true})
	first := checkOn(t, a, Request{Session: "agent-a", Step: "1", Tool: "post_message", Arguments: []byte(notify1)})
	want(t, first, Execute, StageNew)
	if _, err := led.Complete(context.Background(), "acme", first.Key, first.Token, json.RawMessage(`{"ts":"1"}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Settle(context.Background()); err != nil { // its embedding is written to its record
		t.Fatal(err)
	}
	closeFunnel(t, a)
	for i := range 2 {
		b := newFunnel(t, led, time.Now, options{policies: scoped(ScopeTenant), scopes: true})
		res := checkOn(t, b, Request{Session: "agent-b", Step: "2", Tool: "post_message", Arguments: []byte(notify2)})
		if res.Decision != Confirm || res.Match == nil || res.Match.Key != first.Key {
			t.Fatalf("restart %d: %s (%s), match %+v; want confirm naming %s", i, res.Decision, res.Reason, res.Match, first.Key)
		}
		closeFunnel(t, b)
	}
}

// TestScopePastItsBoundSaysSo: a wide scope keeps its newest
// index.max_per_scope calls; once it has left older ones out, a check
// searched against it says how many it did not compare, instead of
// missing them silently.
func TestScopePastItsBoundSaysSo(t *testing.T) {
	e := newEnv(t, options{policies: scoped(ScopeTenant), scopes: true, maxPerScope: 2})
	texts := []string{
		"The nightly deploy of the billing service finished; all checks are green.",
		"Rotating the on-call schedule: Dana takes the pager from Monday.",
		"The database failover drill starts at noon; expect a minute of read-only mode.",
	}
	const note = "oldest calls were not compared"
	for i, text := range texts {
		args := fmt.Sprintf(`{"channel":"#ops","text":%q}`, text)
		res := e.check(t, Request{Session: fmt.Sprintf("agent-%d", i), Step: fmt.Sprint(i + 1), Tool: "post_message", Arguments: []byte(args)})
		want(t, res, Execute, StageNew)
		if i < 2 && hasNote(res, note) {
			t.Errorf("call %d, the scope within its bound: notes %q", i+1, res.Notes)
		}
		if _, err := e.ledger.Complete(context.Background(), "acme", res.Key, res.Token, json.RawMessage(`{"ts":"1"}`)); err != nil {
			t.Fatal(err)
		}
		settle(t, e.f)
	}
	res := e.check(t, Request{Session: "agent-9", Step: "9", Tool: "post_message", Arguments: []byte(notify2)})
	if !hasNote(res, "tenant's 1 "+note) {
		t.Errorf("a check against a scope that dropped its oldest call: %s, notes %q; want a note that 1 call was not compared", res.Decision, res.Notes)
	}
}

func hasNote(res Result, part string) bool {
	for _, n := range res.Notes {
		if strings.Contains(n, part) {
			return true
		}
	}
	return false
}

// gatedEncoder holds back every batch with a text containing hold until
// release is closed (held is closed when the first arrives).
type gatedEncoder struct {
	Embedder
	hold          string
	held, release chan struct{}
	once          sync.Once
}

func newGatedEncoder(inner Embedder, hold string) *gatedEncoder {
	return &gatedEncoder{Embedder: inner, hold: hold, held: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedEncoder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if slices.ContainsFunc(texts, func(t string) bool { return strings.Contains(t, g.hold) }) {
		g.once.Do(func() { close(g.held) })
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Embedder.Embed(ctx, texts)
}

// TestWideScopeWaitsForACallStillBeingEmbedded: a sub-agent re-sends in
// other words a notification that another session's agent sent a moment
// before, whose embedding is still being computed (so it is not in the
// wide scope's index yet). The check waits for that embedding and
// compares it; when the budget runs out first it says it could not
// compare, and asks: it never executes as if the scope were empty.
func TestWideScopeWaitsForACallStillBeingEmbedded(t *testing.T) {
	hold := "finished; all checks are green"
	t.Run("embedding lands", func(t *testing.T) {
		enc := newGatedEncoder(encoder(t), hold)
		e := newEnv(t, options{policies: scoped(ScopeWorkflow), scopes: true, embedder: enc})
		a := e.check(t, Request{Session: "agent-a", Workflow: "deploy", Step: "1", Tool: "post_message", Arguments: []byte(notify1)})
		want(t, a, Execute, StageNew)
		<-enc.held // agent-a's call is being embedded, after its claim
		answer := make(chan Result, 1)
		go func() {
			answer <- e.check(t, Request{Session: "agent-b", Workflow: "deploy", Step: "2", Tool: "post_message", Arguments: []byte(notify2)})
		}()
		close(enc.release)
		res := <-answer
		if res.Decision != Confirm || res.Match == nil || res.Match.Key != a.Key || res.Scope != "workflow" {
			t.Fatalf("agent-b's rewording: %s at %s (%s), match %+v; want confirm naming agent-a's call", res.Decision, res.Stage, res.Reason, res.Match)
		}
	})
	t.Run("budget runs out first", func(t *testing.T) {
		enc := newGatedEncoder(newMemoEncoder(t, "The nightly deploy of the billing service has finished, and all checks are green."), hold)
		e := newEnv(t, options{policies: scoped(ScopeWorkflow), scopes: true, embedder: enc, budget: 300 * time.Millisecond})
		t.Cleanup(func() { close(enc.release) })
		want(t, e.check(t, Request{Session: "agent-a", Workflow: "deploy", Step: "1", Tool: "post_message", Arguments: []byte(notify1)}), Execute, StageNew)
		<-enc.held
		res := e.check(t, Request{Session: "agent-b", Workflow: "deploy", Step: "2", Tool: "post_message", Arguments: []byte(notify2)})
		if res.Decision != Confirm || res.NotCompared == nil || !res.BudgetExceeded {
			t.Fatalf("agent-b's rewording while agent-a's call is still being embedded: %s at %s (%s), not compared %+v; want confirm saying the budget ran out", res.Decision, res.Stage, res.Reason, res.NotCompared)
		}
	})
}

// TestWideScopeComparesABlindRecord: another session's call whose record
// holds no embedding (its claimant could not embed it, and stopped: as a
// process that crashed, or a replica still computing it) is listed by the
// wide scope as blind; a later rewording in another session embeds it and
// is caught, instead of executing as if the scope were empty.
func TestWideScopeComparesABlindRecord(t *testing.T) {
	led, first := blindClaim(t)
	if got, err := led.Get(context.Background(), "acme", first.Key); err != nil || len(got.Record.Embedding) != 0 {
		t.Fatalf("agent-a's record: %d embedding values, %v; want none", len(got.Record.Embedding), err)
	}

	b := newFunnel(t, led, time.Now, options{policies: scoped(ScopeWorkflow), scopes: true})
	res := checkOn(t, b, Request{Session: "agent-b", Step: "2", Tool: "post_message", Arguments: []byte(notify2)})
	if res.Decision != Confirm || res.Match == nil || res.Match.Key != first.Key {
		t.Fatalf("agent-b's rewording: %s at %s (%s), match %+v; want confirm naming agent-a's call", res.Decision, res.Stage, res.Reason, res.Match)
	}
	settle(t, b) // the embedding it computed is written to agent-a's record
	if got, err := led.Get(context.Background(), "acme", first.Key); err != nil || len(got.Record.Embedding) == 0 {
		t.Errorf("agent-a's record after the check embedded it: %d embedding values, %v", len(got.Record.Embedding), err)
	}
}

// blindClaim claims notify1 for agent-a through a funnel whose encoder
// fails, and closes it: the record holds the call's text and no embedding.
func blindClaim(t *testing.T) (*ledger.Ledger, Result) {
	t.Helper()
	led := openStore(t, t.TempDir())
	a := newFunnel(t, led, time.Now, options{policies: scoped(ScopeWorkflow), scopes: true, embedder: brokenEncoder{encoder(t)}})
	first := checkOn(t, a, Request{Session: "agent-a", Step: "1", Tool: "post_message", Arguments: []byte(notify1)})
	want(t, first, Execute, StageNew)
	closeFunnel(t, a)
	return led, first
}

// TestWideScopeForgetsAFailedBlindRecord: a blind record whose call then
// failed (its effect did not happen) is no candidate: the rewording
// executes, and the scope stops listing it.
func TestWideScopeForgetsAFailedBlindRecord(t *testing.T) {
	led, first := blindClaim(t)

	b := newFunnel(t, led, time.Now, options{policies: scoped(ScopeWorkflow), scopes: true})
	// A call to another channel loads the scope: agent-a's call is in it, blind.
	other := checkOn(t, b, Request{Session: "agent-b", Step: "2", Tool: "post_message",
		Arguments: []byte(`{"channel":"#billing","text":"Invoices for March are out."}`)})
	want(t, other, Execute, StageNew)
	name := wideScope(&b.cfg.Policies[0], "acme", "wf")
	tag := scopeTag("post_message", first.IdentityDigest, true)
	idx := b.scopes.(*index.Flat)
	if ids := idx.Blind(name, tag); !slices.Equal(ids, []string{first.Key}) {
		t.Fatalf("the scope's blind calls: %v; want agent-a's", ids)
	}
	if _, err := led.Fail(context.Background(), "acme", first.Key, first.Token, json.RawMessage(`{"error":"smtp down"}`), ledger.ClassPermanent); err != nil {
		t.Fatal(err)
	}
	res := checkOn(t, b, Request{Session: "agent-b", Step: "3", Tool: "post_message", Arguments: []byte(notify2)})
	want(t, res, Execute, StageNew)
	if ids := idx.Blind(name, tag); len(ids) != 0 {
		t.Errorf("after the call failed, the scope still lists it blind: %v", ids)
	}
}
