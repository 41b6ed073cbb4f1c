package funnel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/ledger/postgres"
	"github.com/idem-dev/idem/ledger/postgres/pgtest"
)

// TestReplicasRacingTwinsExecuteOnce: two replicas (two funnels, each
// with its own session views and index, on one ledger) are asked at the
// same instant for the same effect under different keys (different step
// ids) in one session. Both have looked before either claims (a meeting
// holds the first claims), so neither has seen the other's call; the
// session fence makes the later claim look again, so exactly one of them
// executes, round after round. Without the fence both execute every round.
//
// It runs on Badger (one store under both funnels) and, with
// IDEM_TEST_POSTGRES_DSN set (scripts/with-postgres), on PostgreSQL with a
// store per replica.
func TestReplicasRacingTwinsExecuteOnce(t *testing.T) {
	onReplicaStores(t, raceReplicas)
}

// onReplicaStores runs fn on the stores of two replicas: one Badger store
// under both, and, with IDEM_TEST_POSTGRES_DSN set (scripts/with-postgres),
// a PostgreSQL store each on one schema.
func onReplicaStores(t *testing.T, fn func(t *testing.T, stores [2]ledger.Store, now func() time.Time)) {
	t.Run("badger", func(t *testing.T) {
		store := openBadger(t, t.TempDir())
		fn(t, [2]ledger.Store{store, store}, time.Now)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		schema := pgtest.Schema(t, dsn, "funnel_")
		var stores [2]ledger.Store
		var now func() time.Time
		for i := range stores {
			cfg := postgres.DefaultConfig(dsn)
			cfg.Schema = schema
			ps, err := postgres.Open(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ps.Close(context.Background()) })
			stores[i], now = ps, ps.Now
		}
		fn(t, stores, now)
	})
}

// meeting holds the first claims of two racing checks until both have
// arrived, so that each has looked at the session before either claims:
// the race the fence is for, every round rather than when the scheduler
// happens to allow it. Later claims (a fenced claim's retries) pass.
type meeting struct {
	mu      sync.Mutex // guards arrived
	arrived int
	all     chan struct{} // closed when both have arrived
}

func newMeeting() *meeting { return &meeting{all: make(chan struct{})} }

func (m *meeting) arrive() {
	m.mu.Lock()
	m.arrived++
	if m.arrived == 2 {
		close(m.all)
	}
	m.mu.Unlock()
	select {
	case <-m.all:
	case <-time.After(5 * time.Second): // the other check decided without claiming
	}
}

// meetingLedger is a replica's ledger whose claims go through the round's
// meeting, when there is one.
type meetingLedger struct {
	*ledger.Ledger
	meeting *atomic.Pointer[meeting]
}

func (l meetingLedger) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	if m := l.meeting.Load(); m != nil {
		m.arrive()
	}
	return l.Ledger.Claim(ctx, req)
}

func raceReplicas(t *testing.T, stores [2]ledger.Store, now func() time.Time) {
	var (
		replicas [2]*Funnel
		meet     atomic.Pointer[meeting]
	)
	for i, st := range stores {
		lcfg := ledger.DefaultConfig()
		lcfg.Now = now
		led, err := ledger.New(st, lcfg)
		if err != nil {
			t.Fatal(err)
		}
		// A budget the race detector cannot run out: a fallback would
		// decide instead of the stages under test.
		replicas[i] = newFunnel(t, meetingLedger{led, &meet}, now, options{budget: time.Minute})
	}
	cases := []struct {
		name, tool, a, b string
	}{
		{"byte-identical", "send_email", invoice, invoice},
		{"reworded", "send_email", invoice, invoiceReworded},
		{"no text", "charge", `{"card":"tok_1","amount":50}`, `{"amount":50.0,"card":"tok_1"}`},
	}
	const rounds = 25
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for round := range rounds {
				session := fmt.Sprintf("%s-%d", strings.ReplaceAll(tc.name, " ", "-"), round)
				// Warm both replicas' views of the session, as a running
				// agent's earlier calls would have.
				for _, f := range replicas {
					if _, err := f.Check(t.Context(), Request{Tenant: "acme", Session: session, Workflow: session,
						Step: "warm-" + fmt.Sprint(f == replicas[0]), Tool: "lookup", Arguments: []byte(`{"q":"x"}`)}); err != nil {
						t.Fatal(err)
					}
				}
				meet.Store(newMeeting())
				var (
					wg      sync.WaitGroup
					start   = make(chan struct{})
					results [2]Result
					errs    [2]error
				)
				for i, f := range replicas {
					args := []string{tc.a, tc.b}[i]
					wg.Go(func() {
						<-start
						results[i], errs[i] = f.Check(t.Context(), Request{Tenant: "acme", Session: session, Workflow: session,
							Step: fmt.Sprint("step-", i), Tool: tc.tool, Arguments: []byte(args)})
					})
				}
				close(start)
				wg.Wait()
				meet.Store(nil)
				executes := 0
				for i, r := range results {
					if errs[i] != nil {
						t.Fatalf("round %d, replica %d: %v", round, i, errs[i])
					}
					if r.Decision == Execute {
						executes++
					}
				}
				if executes != 1 {
					t.Fatalf("round %d: decisions %s (%s: %s) and %s (%s: %s): want exactly one execute", round,
						results[0].Decision, results[0].Stage, results[0].Reason,
						results[1].Decision, results[1].Stage, results[1].Reason)
				}
			}
		})
	}
}

// TestForgottenNewestCallDoesNotWedgeTheSession: the session's newest
// number, taken by another replica, has no record any more (forgotten), so
// the view's newest Seq is behind the session's counter. The first fenced
// claim is refused, learns where the counter stands and claims again;
// later claims fence on it straight away. A number the view took itself
// is covered by its claim: forgetting that call refuses nothing.
func TestForgottenNewestCallDoesNotWedgeTheSession(t *testing.T) {
	e := newEnv(t, options{})
	e.run(t, Request{Step: "1", Tool: "refund", Arguments: []byte(`{"order_id":"O1"}`)}, `{"ok":true}`)
	moved := func(r Result) bool {
		for _, n := range r.Notes {
			if strings.Contains(n, "session moved on") {
				return true
			}
		}
		return false
	}
	other, err := e.ledger.Claim(t.Context(), ledger.ClaimRequest{Tenant: "acme", Key: "wf:2:refund", Session: "s1",
		Workflow: "wf", Step: "2", Tool: "refund", Canonical: []byte(`{"order_id":"O2"}`), Hash: 2, Identity: 2})
	if err != nil || other.Outcome != ledger.Claimed {
		t.Fatalf("the other replica's claim: %v %v", other.Outcome, err)
	}
	if err := e.ledger.Forget(t.Context(), "acme", other.Record.Key, true); err != nil {
		t.Fatal(err)
	}
	third := e.check(t, Request{Step: "3", Tool: "refund", Arguments: []byte(`{"order_id":"O3"}`)})
	want(t, third, Execute, StageNew)
	if !moved(third) {
		t.Errorf("notes %q: want the claim refused once (the forgotten number) and made again", third.Notes)
	}
	fourth := e.check(t, Request{Step: "4", Tool: "refund", Arguments: []byte(`{"order_id":"O4"}`)})
	want(t, fourth, Execute, StageNew)
	if moved(fourth) {
		t.Errorf("notes %q: the view should know where the counter stands by now", fourth.Notes)
	}
	if err := e.ledger.Forget(t.Context(), "acme", fourth.Key, true); err != nil {
		t.Fatal(err)
	}
	fifth := e.check(t, Request{Step: "5", Tool: "refund", Arguments: []byte(`{"order_id":"O5"}`)})
	want(t, fifth, Execute, StageNew)
	if moved(fifth) {
		t.Errorf("notes %q: the view's own claim, forgotten, refused the next one", fifth.Notes)
	}
}

// restarter refuses the first fenced claim as a ledger whose session
// numbering restarted would (the counter behind the view's newest Seq).
type restarter struct {
	*ledger.Ledger
	once sync.Once
}

func (l *restarter) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	var refuse bool
	if req.Fenced {
		l.once.Do(func() { refuse = true })
	}
	if refuse {
		return ledger.Claim{}, fmt.Errorf("claim %q: %w", req.Key, &ledger.SessionMovedError{Seen: req.SessionSeen, Last: 0})
	}
	return l.Ledger.Claim(ctx, req)
}

// TestRestartedNumberingReloadsTheView: a refusal reporting the counter
// behind what the view listed means the session's numbering restarted; the
// view is reloaded from the ledger rather than fenced on a number the
// counter will not reach soon, and still finds the earlier calls.
func TestRestartedNumberingReloadsTheView(t *testing.T) {
	e := newEnv(t, options{})
	e.run(t, Request{Step: "1", Tool: "refund", Arguments: []byte(`{"order_id":"O1"}`)}, `{"ok":true}`)
	e.run(t, Request{Step: "2", Tool: "refund", Arguments: []byte(`{"order_id":"O2"}`)}, `{"ok":true}`)
	e.f.ledger = &restarter{Ledger: e.ledger}
	want(t, e.check(t, Request{Step: "3", Tool: "refund", Arguments: []byte(`{"order_id":"O3"}`)}), Execute, StageNew)
	want(t, e.check(t, Request{Step: "4", Tool: "refund", Arguments: []byte(`{"order_id":"O1"}`)}), Duplicate, StageExact)
}

// restless refuses every fenced claim: a session other replicas claim in
// faster than this one can compare.
type restless struct {
	*ledger.Ledger
	refused atomic.Int32
}

func (l *restless) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	if req.Fenced {
		l.refused.Add(1)
		return ledger.Claim{}, fmt.Errorf("claim %q: %w", req.Key, &ledger.SessionMovedError{Seen: req.SessionSeen, Last: req.SessionSeen})
	}
	return l.Ledger.Claim(ctx, req)
}

// TestSessionThatKeepsMovingGivesUp: a claim refused round after round
// gives up after maxFenceRounds with ErrSessionMoved (the server's 503),
// having written nothing.
func TestSessionThatKeepsMovingGivesUp(t *testing.T) {
	e := newEnv(t, options{})
	l := &restless{Ledger: e.ledger}
	e.f.ledger = l
	_, err := e.f.Check(t.Context(), Request{Tenant: "acme", Session: "s1", Workflow: "wf", Step: "1", Tool: "refund",
		Arguments: []byte(`{"order_id":"O1"}`)})
	if !errors.Is(err, ledger.ErrSessionMoved) {
		t.Fatalf("Check: %v, want ErrSessionMoved", err)
	}
	if n := l.refused.Load(); n != maxFenceRounds {
		t.Errorf("%d fenced claims, want %d", n, maxFenceRounds)
	}
	if recs, err := e.ledger.Session(t.Context(), "acme", "s1", 0, 0); err != nil || len(recs) != 0 {
		t.Errorf("session holds %d records (%v), want none", len(recs), err)
	}
}

// TestReplicasWideScopeSeesAClaimStillBeingEmbedded: on one ledger, replica
// A claims a call whose embedding it is still computing (its encoder holds
// it back); replica B, asked a moment later for a rewording in another
// session of the workflow, finds A's record without an embedding, embeds it
// itself and asks for confirmation instead of executing the effect twice.
func TestReplicasWideScopeSeesAClaimStillBeingEmbedded(t *testing.T) {
	run := func(t *testing.T, stores [2]ledger.Store, now func() time.Time) {
		var leds [2]*ledger.Ledger
		for i, st := range stores {
			lcfg := ledger.DefaultConfig()
			lcfg.Now = now
			l, err := ledger.New(st, lcfg)
			if err != nil {
				t.Fatal(err)
			}
			leds[i] = l
		}
		held := newGatedEncoder(encoder(t), "finished; all checks are green")
		t.Cleanup(func() { close(held.release) })
		a := newFunnel(t, leds[0], now, options{policies: scoped(ScopeWorkflow), scopes: true, embedder: held})
		b := newFunnel(t, leds[1], now, options{policies: scoped(ScopeWorkflow), scopes: true})
		first := checkOn(t, a, Request{Session: "agent-a", Step: "1", Tool: "post_message", Arguments: []byte(notify1)})
		want(t, first, Execute, StageNew)
		<-held.held // A is computing its embedding
		res := checkOn(t, b, Request{Session: "agent-b", Step: "2", Tool: "post_message", Arguments: []byte(notify2)})
		if res.Decision != Confirm || res.Match == nil || res.Match.Key != first.Key || res.Scope != "workflow" {
			t.Fatalf("replica B, a rewording of replica A's call: %s at %s (%s), match %+v; want confirm naming A's call", res.Decision, res.Stage, res.Reason, res.Match)
		}
	}
	onReplicaStores(t, run)
}
