// Package ledgertest is the conformance suite every ledger.Store must pass:
// each transition of the state machine, legal and illegal, leases,
// renewals and takeover, retention, waiting, listing order, tenant
// isolation, records written in the old key form and the confirmation a
// claim stores on its record, driven through a ledger.Ledger over the
// store under test; for a ledger.FencedStore, fenced claims; and, with
// Corrupt, what a record damaged at rest does.
//
//	func TestConformance(t *testing.T) {
//		ledgertest.Run(t, func(t *testing.T) ledger.Store { return openStore(t) })
//	}
package ledgertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/ledger"
)

// Clock is a settable clock for ledger.Config.Now. It is safe for
// concurrent use.
type Clock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

// NewClock returns a clock set to t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// The suite's ledger configuration.
const (
	lease     = time.Minute
	maxLease  = 10 * time.Minute
	retention = time.Hour
	maxResult = 4096
)

type env struct {
	t     *testing.T
	store ledger.Store
	clock *Clock
	l     *ledger.Ledger
	ctx   context.Context
}

func newEnv(t *testing.T, open func(t *testing.T) ledger.Store) *env {
	t.Helper()
	e := &env{t: t, store: open(t), clock: NewClock(time.Now().Truncate(time.Millisecond)), ctx: t.Context()}
	e.l = e.ledgerWith(e.clock.Now)
	return e
}

func (e *env) ledgerWith(now func() time.Time) *ledger.Ledger {
	e.t.Helper()
	cfg := ledger.DefaultConfig()
	cfg.Lease, cfg.MaxLease, cfg.Retention, cfg.MaxResultBytes, cfg.Now = lease, maxLease, retention, maxResult, now
	l, err := ledger.New(e.store, cfg)
	if err != nil {
		e.t.Fatalf("ledger.New: %v", err)
	}
	return l
}

// req returns a claim request for key in tenant t1, session s1, workflow w1.
func req(key string) ledger.ClaimRequest {
	return ledger.ClaimRequest{
		Tenant: "t1", Key: key, Session: "s1", Workflow: "w1", Step: "step-" + key, Tool: "send_email",
		Canonical: []byte(`{"to":"a@example.com","subject":"` + key + `"}`),
		Hash:      0xfeedface00000000 | uint64(len(key)), Identity: 42,
		Embedding: []float32{0.25, -0.5, 1, 0}, EmbeddingModel: "use-lite",
		Attempt: 1,
	}
}

func (e *env) claim(r ledger.ClaimRequest, want ledger.Outcome) ledger.Claim {
	e.t.Helper()
	c, err := e.l.Claim(e.ctx, r)
	if err != nil {
		e.t.Fatalf("Claim(%q): %v", r.Key, err)
	}
	if c.Outcome != want {
		e.t.Fatalf("Claim(%q) = %v (record %v), want %v", r.Key, c.Outcome, c.Record.Status, want)
	}
	if (c.Token != "") != (want == ledger.Claimed) {
		e.t.Fatalf("Claim(%q) outcome %v came with token %q", r.Key, c.Outcome, c.Token)
	}
	if want != ledger.Claimed && c.Record.Token != "" {
		e.t.Fatalf("Claim(%q) handed the holder's token to a loser", r.Key)
	}
	return c
}

func (e *env) complete(tenant, key, token string, result string) ledger.Record {
	e.t.Helper()
	rec, err := e.l.Complete(e.ctx, tenant, key, token, json.RawMessage(result))
	if err != nil {
		e.t.Fatalf("Complete(%q): %v", key, err)
	}
	return rec
}

func (e *env) get(tenant, key string) ledger.Claim {
	e.t.Helper()
	c, err := e.l.Get(e.ctx, tenant, key)
	if err != nil {
		e.t.Fatalf("Get(%q): %v", key, err)
	}
	return c
}

func wantErr(t *testing.T, op string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", op, err, target)
	}
}

func keys(recs []ledger.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Key
	}
	return out
}

// Run runs the suite; open must return a fresh, empty store for each
// subtest and arrange its closing with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) ledger.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, e *env)
	}{
		{"ClaimNewKey", testClaimNewKey},
		{"ClaimHeldKeyIsInProgress", testClaimHeld},
		{"CompleteThenClaimReplaysResult", testCompleteReplays},
		{"CompleteTwiceIsRefused", testCompleteTwice},
		{"FailASuccessIsRefused", testFailSuccess},
		{"FailPermanentReplaysError", testFailPermanent},
		{"FailTransientFreesKey", testFailTransient},
		{"ExpiredLeaseIsUncertainAndTakenOver", testTakeover},
		{"TakeoverOfLiveLeaseIsInProgress", testTakeoverLive},
		{"ExpiredHolderMayCompleteUntilTakenOver", testExpiredHolderCompletes},
		{"ConcurrentTakeoversOneWinner", testConcurrentTakeover},
		{"ConcurrentClaimsOneWinner", testConcurrentClaims},
		{"UnknownKey", testUnknownKey},
		{"BadInput", testBadInput},
		{"Retention", testRetention},
		{"WaitReleasedByComplete", testWaitComplete},
		{"WaitReleasedByFail", testWaitFail},
		{"WaitReturnsUncertainAtLeaseExpiry", testWaitLease},
		{"WaitEndsWithContext", testWaitContext},
		{"WaitOnForgottenRecord", testWaitForget},
		{"SessionListingInArrivalOrder", testSessionOrder},
		{"WorkflowListing", testWorkflowListing},
		{"TenantIsolation", testTenants},
		{"ForgetFreesKey", testForget},
		{"ForgetOfLiveLeaseNeedsForce", testForgetLive},
		{"RenewExtendsLease", testRenew},
		{"RenewWithStaleTokenIsRefused", testRenewStale},
		{"RenewOfExpiredLease", testRenewExpired},
		{"RenewNeverPastMaxLease", testRenewMaxLease},
		{"ConcurrentRenewAndTakeoverOneWinner", testRenewVsTakeover},
		{"LegacyExplicitKeysStayReadable", testLegacyKeys},
		{"FencedClaimWins", testFencedClaimWins},
		{"FencedClaimAtStaleSeqWritesNothing", testFencedClaimStale},
		{"FencedClaimOfHeldKeyAnswersAsUnfenced", testFencedClaimOfHeldKey},
		{"ConcurrentFencedClaimsOneWinner", testConcurrentFencedClaims},
		{"SetEmbeddingKeepsTheRest", testSetEmbedding},
		{"ConfirmedIsKeptOnTheRecord", testConfirmed},
		{"RecentSessionsMostRecentFirst", testRecentSessions},
		{"ListTenantByCreation", testListTenant},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newEnv(t, open)) })
	}
}

func testClaimNewKey(t *testing.T, e *env) {
	r := req("k1")
	c := e.claim(r, ledger.Claimed)
	if c.Previous != nil {
		t.Errorf("a new key has a previous record: %+v", c.Previous)
	}
	now := e.clock.Now()
	got := c.Record
	if got.Token != c.Token || got.Status != ledger.StatusPending || got.Seq == 0 {
		t.Errorf("claimed record: token %q status %v seq %d, want token %q PENDING seq>0", got.Token, got.Status, got.Seq, c.Token)
	}
	if got.LeaseUntil != now.Add(lease).UnixMilli() || got.CreatedAt != now.UnixMilli() || got.UpdatedAt != now.UnixMilli() {
		t.Errorf("times: lease %d created %d updated %d, now %d", got.LeaseUntil, got.CreatedAt, got.UpdatedAt, now.UnixMilli())
	}
	// Everything the semantic index needs comes back from the store.
	stored := e.get("t1", "k1").Record
	for _, rec := range []ledger.Record{got, stored} {
		if rec.Tenant != r.Tenant || rec.Key != r.Key || rec.Session != r.Session || rec.Workflow != r.Workflow ||
			rec.Step != r.Step || rec.Tool != r.Tool || string(rec.Canonical) != string(r.Canonical) ||
			rec.Hash != r.Hash || rec.Identity != r.Identity || !slices.Equal(rec.Embedding, r.Embedding) ||
			rec.EmbeddingModel != r.EmbeddingModel || rec.Attempt != r.Attempt || rec.Seq != got.Seq {
			t.Errorf("record does not carry the claim's fields:\n got %+v\nwant %+v", rec, r)
		}
	}
	if stored.Token != "" {
		t.Errorf("Get revealed the lease token")
	}
}

func testClaimHeld(t *testing.T, e *env) {
	first := req("k1")
	won := e.claim(first, ledger.Claimed)
	second := req("k1")
	second.Canonical, second.Attempt = []byte(`{"other":true}`), 2
	lost := e.claim(second, ledger.InProgress)
	if string(lost.Record.Canonical) != string(first.Canonical) || lost.Record.Attempt != 1 || lost.Record.Seq != won.Record.Seq {
		t.Errorf("loser was not shown the winner's record: %+v", lost.Record)
	}
}

func testCompleteReplays(t *testing.T, e *env) {
	c := e.claim(req("k1"), ledger.Claimed)
	e.clock.Advance(time.Second)
	rec := e.complete("t1", "k1", c.Token, `{"id":"msg-1","n":12345678901234567890}`)
	if rec.Status != ledger.StatusSuccess || rec.UpdatedAt != e.clock.Now().UnixMilli() {
		t.Errorf("completed record: %v updated %d", rec.Status, rec.UpdatedAt)
	}
	again := e.claim(req("k1"), ledger.Duplicate)
	if string(again.Record.Result) != `{"id":"msg-1","n":12345678901234567890}` {
		t.Errorf("replayed result %s", again.Record.Result)
	}
	if again.Record.Seq != c.Record.Seq || again.Record.CreatedAt != c.Record.CreatedAt {
		t.Errorf("completion moved the record: seq %d→%d", c.Record.Seq, again.Record.Seq)
	}
}

func testCompleteTwice(t *testing.T, e *env) {
	c := e.claim(req("k1"), ledger.Claimed)
	e.complete("t1", "k1", c.Token, `"first"`)
	rec, err := e.l.Complete(e.ctx, "t1", "k1", c.Token, json.RawMessage(`"second"`))
	wantErr(t, "second Complete", err, ledger.ErrNotPending)
	if string(rec.Result) != `"first"` {
		t.Errorf("refused Complete returned record with result %s, want the first", rec.Result)
	}
	_, err = e.l.Fail(e.ctx, "t1", "k1", c.Token, json.RawMessage(`"boom"`), ledger.ClassTransient)
	wantErr(t, "Fail after Complete", err, ledger.ErrNotPending)
	if got := e.get("t1", "k1").Record; string(got.Result) != `"first"` || got.Status != ledger.StatusSuccess {
		t.Errorf("record changed: %v %s", got.Status, got.Result)
	}
}

func testFailSuccess(t *testing.T, e *env) {
	c := e.claim(req("k1"), ledger.Claimed)
	e.complete("t1", "k1", c.Token, `{"ok":true}`)
	for _, class := range []ledger.ErrorClass{ledger.ClassTransient, ledger.ClassPermanent} {
		_, err := e.l.Fail(e.ctx, "t1", "k1", c.Token, json.RawMessage(`{"err":"late"}`), class)
		wantErr(t, "Fail of SUCCESS", err, ledger.ErrNotPending)
	}
	e.claim(req("k1"), ledger.Duplicate)
}

func testFailPermanent(t *testing.T, e *env) {
	c := e.claim(req("k1"), ledger.Claimed)
	rec, err := e.l.Fail(e.ctx, "t1", "k1", c.Token, json.RawMessage(`{"status":422,"msg":"bad address"}`), ledger.ClassPermanent)
	if err != nil || rec.Status != ledger.StatusFailed || rec.Class != ledger.ClassPermanent {
		t.Fatalf("Fail: %v, record %v %v", err, rec.Status, rec.Class)
	}
	again := e.claim(req("k1"), ledger.FailedPermanent)
	if string(again.Record.Error) != `{"status":422,"msg":"bad address"}` || again.Record.Result != nil {
		t.Errorf("replayed error %s result %s", again.Record.Error, again.Record.Result)
	}
	_, err = e.l.Complete(e.ctx, "t1", "k1", c.Token, json.RawMessage(`1`))
	wantErr(t, "Complete after permanent Fail", err, ledger.ErrNotPending)
}

func testFailTransient(t *testing.T, e *env) {
	c := e.claim(req("k1"), ledger.Claimed)
	if _, err := e.l.Fail(e.ctx, "t1", "k1", c.Token, json.RawMessage(`{"status":503}`), ledger.ClassTransient); err != nil {
		t.Fatalf("Fail: %v", err)
	}
	if got := e.get("t1", "k1"); got.Outcome != ledger.Retryable {
		t.Errorf("Get after transient failure = %v, want retryable", got.Outcome)
	}
	e.clock.Advance(time.Second)
	again := e.claim(req("k1"), ledger.Claimed)
	if again.Token == c.Token {
		t.Fatal("a new claim reused the old lease token")
	}
	if again.Previous == nil || again.Previous.Status != ledger.StatusFailed || string(again.Previous.Error) != `{"status":503}` {
		t.Errorf("new claim's Previous = %+v, want the transient failure", again.Previous)
	}
	if again.Record.CreatedAt != c.Record.CreatedAt {
		t.Errorf("re-claim changed CreatedAt %d→%d", c.Record.CreatedAt, again.Record.CreatedAt)
	}
	_, err := e.l.Complete(e.ctx, "t1", "k1", c.Token, json.RawMessage(`"late"`))
	wantErr(t, "Complete with the failed claim's token", err, ledger.ErrStaleToken)
	e.complete("t1", "k1", again.Token, `"ok"`)
	e.claim(req("k1"), ledger.Duplicate)
}

func testTakeover(t *testing.T, e *env) {
	a := e.claim(req("k1"), ledger.Claimed)
	e.clock.Advance(lease - time.Millisecond)
	e.claim(req("k1"), ledger.InProgress)
	e.clock.Advance(time.Millisecond)
	unc := e.claim(req("k1"), ledger.Uncertain)
	if unc.Record.Key != "k1" || unc.Record.Status != ledger.StatusPending {
		t.Errorf("uncertain claim shows %+v", unc.Record)
	}
	if got := e.get("t1", "k1"); got.Outcome != ledger.Uncertain {
		t.Errorf("Get = %v, want uncertain", got.Outcome)
	}
	r := req("k1")
	r.Attempt = 2
	b, err := e.l.Takeover(e.ctx, r)
	if err != nil || b.Outcome != ledger.Claimed || b.Token == "" || b.Token == a.Token {
		t.Fatalf("Takeover = %v token %q, err %v; want claimed with a new token", b.Outcome, b.Token, err)
	}
	if b.Previous == nil || b.Previous.Status != ledger.StatusPending || b.Previous.Token != "" {
		t.Errorf("takeover's Previous = %+v, want the uncertain record without its token", b.Previous)
	}
	rec, err := e.l.Complete(e.ctx, "t1", "k1", a.Token, json.RawMessage(`"from A"`))
	wantErr(t, "Complete with the taken-over token", err, ledger.ErrStaleToken)
	if rec.Status != ledger.StatusPending || rec.Attempt != 2 {
		t.Errorf("stale Complete returned %v attempt %d, want B's pending record", rec.Status, rec.Attempt)
	}
	_, err = e.l.Fail(e.ctx, "t1", "k1", a.Token, json.RawMessage(`"from A"`), ledger.ClassPermanent)
	wantErr(t, "Fail with the taken-over token", err, ledger.ErrStaleToken)
	e.complete("t1", "k1", b.Token, `"from B"`)
	_, err = e.l.Complete(e.ctx, "t1", "k1", a.Token, json.RawMessage(`"from A"`))
	wantErr(t, "Complete with the stale token after B completed", err, ledger.ErrStaleToken)
	if got := e.claim(req("k1"), ledger.Duplicate); string(got.Record.Result) != `"from B"` {
		t.Errorf("result %s, want B's", got.Record.Result)
	}
}

func testTakeoverLive(t *testing.T, e *env) {
	a := e.claim(req("k1"), ledger.Claimed)
	b, err := e.l.Takeover(e.ctx, req("k1"))
	if err != nil || b.Outcome != ledger.InProgress || b.Token != "" {
		t.Fatalf("Takeover of a live lease = %v %q %v, want in_progress", b.Outcome, b.Token, err)
	}
	e.complete("t1", "k1", a.Token, `1`)
	// Takeover of a finished record replays it, like Claim.
	if d, err := e.l.Takeover(e.ctx, req("k1")); err != nil || d.Outcome != ledger.Duplicate {
		t.Fatalf("Takeover of SUCCESS = %v %v, want duplicate", d.Outcome, err)
	}
}

func testExpiredHolderCompletes(t *testing.T, e *env) {
	a := e.claim(req("k1"), ledger.Claimed)
	e.clock.Advance(2 * lease)
	e.complete("t1", "k1", a.Token, `"late but first"`)
	if got := e.claim(req("k1"), ledger.Duplicate); string(got.Record.Result) != `"late but first"` {
		t.Errorf("result %s", got.Record.Result)
	}
}

func testConcurrentTakeover(t *testing.T, e *env) {
	e.claim(req("k1"), ledger.Claimed)
	e.clock.Advance(lease)
	const n = 8
	outs := make([]ledger.Claim, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var err error
			if outs[i], err = e.l.Takeover(e.ctx, req("k1")); err != nil {
				t.Errorf("Takeover: %v", err)
			}
		})
	}
	wg.Wait()
	won := 0
	for _, c := range outs {
		switch c.Outcome {
		case ledger.Claimed:
			won++
		case ledger.InProgress:
		default:
			t.Errorf("concurrent takeover got %v", c.Outcome)
		}
	}
	if won != 1 {
		t.Errorf("%d takeovers won, want 1", won)
	}
}

// testConcurrentClaims: every goroutine claims every key; exactly one wins
// each, every loser sees the winner's record, and the session numbers the
// winners uniquely.
func testConcurrentClaims(t *testing.T, e *env) {
	const goroutines, nkeys = 16, 40
	type result struct {
		c   ledger.Claim
		who int
	}
	results := make([][]result, nkeys)
	var mu sync.Mutex // guards results
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for k := range nkeys {
				r := req(fmt.Sprintf("k%03d", k))
				r.Attempt = g + 1
				c, err := e.l.Claim(e.ctx, r)
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				mu.Lock()
				results[k] = append(results[k], result{c, g + 1})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for k, rs := range results {
		winner := 0
		for _, r := range rs {
			if r.c.Outcome == ledger.Claimed {
				if winner != 0 {
					t.Fatalf("key %d: two winners", k)
				}
				winner = r.who
			}
		}
		if winner == 0 {
			t.Fatalf("key %d: no winner", k)
		}
		for _, r := range rs {
			if r.c.Outcome != ledger.Claimed && (r.c.Outcome != ledger.InProgress || r.c.Record.Attempt != winner) {
				t.Fatalf("key %d: loser got %v with attempt %d, want in_progress from %d", k, r.c.Outcome, r.c.Record.Attempt, winner)
			}
		}
	}
	recs, err := e.l.Session(e.ctx, "t1", "s1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != nkeys {
		t.Fatalf("session lists %d records, want %d", len(recs), nkeys)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Seq <= recs[i-1].Seq {
			t.Fatalf("session order not strictly increasing: %d then %d", recs[i-1].Seq, recs[i].Seq)
		}
	}
}

func testUnknownKey(t *testing.T, e *env) {
	_, err := e.l.Complete(e.ctx, "t1", "nope", "tok", json.RawMessage(`1`))
	wantErr(t, "Complete", err, ledger.ErrNotFound)
	_, err = e.l.Fail(e.ctx, "t1", "nope", "tok", json.RawMessage(`1`), ledger.ClassPermanent)
	wantErr(t, "Fail", err, ledger.ErrNotFound)
	_, err = e.l.Get(e.ctx, "t1", "nope")
	wantErr(t, "Get", err, ledger.ErrNotFound)
	_, err = e.l.Wait(e.ctx, "t1", "nope")
	wantErr(t, "Wait", err, ledger.ErrNotFound)
	wantErr(t, "Forget", e.l.Forget(e.ctx, "t1", "nope", false), ledger.ErrNotFound)
}

func testBadInput(t *testing.T, e *env) {
	c := e.claim(req("k1"), ledger.Claimed)
	big := json.RawMessage(`"` + string(make([]byte, maxResult)) + `"`)
	for i := range big[1 : len(big)-1] {
		big[i+1] = 'x'
	}
	noTenant := req("k2")
	noTenant.Tenant = ""
	noKey := req("")
	bigCall := req("k3")
	bigCall.Canonical = big
	longSession := req("k5")
	longSession.Session = strings.Repeat("s", ledger.MaxKeyBytes+1)
	nanEmbedding := req("k4")
	nanEmbedding.Embedding = []float32{0, float32(math.NaN())}
	badConfirmed := req("k6")
	badConfirmed.Confirmed = "w1:1:send\nemail"
	cases := []struct {
		name   string
		do     func() error
		target error
		field  string
	}{
		{"claim without tenant", func() error { _, err := e.l.Claim(e.ctx, noTenant); return err }, ledger.ErrInvalidInput, "tenant"},
		{"claim without key", func() error { _, err := e.l.Claim(e.ctx, noKey); return err }, ledger.ErrInvalidInput, "key"},
		{"claim of oversized call", func() error { _, err := e.l.Claim(e.ctx, bigCall); return err }, ledger.ErrTooLarge, "canonical"},
		{"claim with oversized session id", func() error { _, err := e.l.Claim(e.ctx, longSession); return err }, ledger.ErrTooLarge, "session_id"},
		{"claim with NaN in embedding", func() error { _, err := e.l.Claim(e.ctx, nanEmbedding); return err }, ledger.ErrInvalidInput, "embedding"},
		{"claim with a control character in confirmed", func() error { _, err := e.l.Claim(e.ctx, badConfirmed); return err }, ledger.ErrInvalidInput, "confirmed"},
		{"complete without tenant", func() error {
			_, err := e.l.Complete(e.ctx, "", "k1", c.Token, json.RawMessage(`1`))
			return err
		}, ledger.ErrInvalidInput, "tenant"},
		{"complete without token", func() error {
			_, err := e.l.Complete(e.ctx, "t1", "k1", "", json.RawMessage(`1`))
			return err
		}, ledger.ErrInvalidInput, "token"},
		{"complete with oversized result", func() error {
			_, err := e.l.Complete(e.ctx, "t1", "k1", c.Token, big)
			return err
		}, ledger.ErrTooLarge, "result"},
		{"complete with invalid JSON", func() error {
			_, err := e.l.Complete(e.ctx, "t1", "k1", c.Token, json.RawMessage(`{"a":`))
			return err
		}, ledger.ErrInvalidInput, "result"},
		{"fail with oversized error", func() error {
			_, err := e.l.Fail(e.ctx, "t1", "k1", c.Token, big, ledger.ClassPermanent)
			return err
		}, ledger.ErrTooLarge, "error"},
		{"fail without class", func() error {
			_, err := e.l.Fail(e.ctx, "t1", "k1", c.Token, json.RawMessage(`1`), ledger.ClassNone)
			return err
		}, ledger.ErrInvalidInput, "class"},
		{"get without key", func() error { _, err := e.l.Get(e.ctx, "t1", ""); return err }, ledger.ErrInvalidInput, "key"},
		{"forget without tenant", func() error { return e.l.Forget(e.ctx, "", "k1", false) }, ledger.ErrInvalidInput, "tenant"},
		{"session without id", func() error { _, err := e.l.Session(e.ctx, "t1", "", 0, 0); return err }, ledger.ErrInvalidInput, "session_id"},
		{"workflow without id", func() error { _, err := e.l.Workflow(e.ctx, "t1", ""); return err }, ledger.ErrInvalidInput, "workflow_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			wantErr(t, tc.name, err, tc.target)
			fe, ok := errors.AsType[*ledger.FieldError](err)
			if !ok || fe.Field != tc.field {
				t.Fatalf("%s: error %v does not name field %q", tc.name, err, tc.field)
			}
		})
	}
	// None of the refused calls touched the record.
	if got := e.get("t1", "k1"); got.Outcome != ledger.InProgress {
		t.Errorf("record is %v after refused calls, want in_progress", got.Outcome)
	}
	// A result exactly at the limit is accepted.
	e.complete("t1", "k1", c.Token, string(big[:maxResult-1])+`"`)
}

func testRetention(t *testing.T, e *env) {
	c := e.claim(req("done"), ledger.Claimed)
	e.complete("t1", "done", c.Token, `"r"`)
	p := e.claim(req("pending"), ledger.Claimed)
	e.clock.Advance(retention - time.Millisecond)
	e.claim(req("done"), ledger.Duplicate)
	e.claim(req("pending"), ledger.Uncertain)
	e.clock.Advance(time.Millisecond)
	if _, err := e.l.Get(e.ctx, "t1", "done"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Get after retention: %v, want not found", err)
	}
	recs, err := e.l.Session(e.ctx, "t1", "s1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(recs); !slices.Equal(got, []string{"pending"}) {
		t.Errorf("session after retention lists %v, want [pending] (kept for lease+retention)", got)
	}
	if recs, err := e.l.Session(e.ctx, "t1", "s1", 0, 1); err != nil || !slices.Equal(keys(recs), []string{"pending"}) {
		t.Errorf("first page of 1 after retention: %v, %v; want [pending], not an empty page", keys(recs), err)
	}
	fresh := e.claim(req("done"), ledger.Claimed)
	if fresh.Previous != nil {
		t.Errorf("claim after retention saw a previous record")
	}
	e.clock.Advance(lease)
	if _, err := e.l.Get(e.ctx, "t1", "pending"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("abandoned PENDING after lease+retention: %v, want not found", err)
	}
	_, err = e.l.Complete(e.ctx, "t1", "pending", p.Token, json.RawMessage(`1`))
	wantErr(t, "Complete after retention", err, ledger.ErrNotFound)
}

// waitAsync starts Wait in a goroutine.
func (e *env) waitAsync(ctx context.Context, l *ledger.Ledger, key string) <-chan struct {
	c   ledger.Claim
	err error
} {
	ch := make(chan struct {
		c   ledger.Claim
		err error
	}, 1)
	go func() {
		c, err := l.Wait(ctx, "t1", key)
		ch <- struct {
			c   ledger.Claim
			err error
		}{c, err}
	}()
	return ch
}

func testWaitComplete(t *testing.T, e *env) {
	c := e.claim(req("k1"), ledger.Claimed)
	done := e.waitAsync(e.ctx, e.l, "k1")
	e.complete("t1", "k1", c.Token, `{"sent":true}`)
	got := <-done
	if got.err != nil || got.c.Outcome != ledger.Duplicate || string(got.c.Record.Result) != `{"sent":true}` {
		t.Fatalf("Wait = %v %s, %v; want duplicate with the result", got.c.Outcome, got.c.Record.Result, got.err)
	}
}

func testWaitFail(t *testing.T, e *env) {
	c := e.claim(req("k1"), ledger.Claimed)
	done := e.waitAsync(e.ctx, e.l, "k1")
	if _, err := e.l.Fail(e.ctx, "t1", "k1", c.Token, json.RawMessage(`"503"`), ledger.ClassTransient); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got.err != nil || got.c.Outcome != ledger.Retryable {
		t.Fatalf("Wait = %v, %v; want retryable", got.c.Outcome, got.err)
	}
}

func testWaitLease(t *testing.T, e *env) {
	// Timers run on real time: this ledger uses the real clock and a short
	// lease. Nothing completes the record; only the lease timer can end Wait.
	l := e.ledgerWith(time.Now)
	r := req("k1")
	r.Lease = 50 * time.Millisecond
	if c, err := l.Claim(e.ctx, r); err != nil || c.Outcome != ledger.Claimed {
		t.Fatalf("Claim: %v %v", c.Outcome, err)
	}
	got := <-e.waitAsync(e.ctx, l, "k1")
	if got.err != nil || got.c.Outcome != ledger.Uncertain {
		t.Fatalf("Wait = %v, %v; want uncertain", got.c.Outcome, got.err)
	}
}

func testWaitContext(t *testing.T, e *env) {
	e.claim(req("k1"), ledger.Claimed)
	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Millisecond)
	defer cancel()
	got := <-e.waitAsync(ctx, e.l, "k1")
	if !errors.Is(got.err, context.DeadlineExceeded) || got.c.Outcome != ledger.InProgress {
		t.Fatalf("Wait = %v, %v; want in_progress and the deadline", got.c.Outcome, got.err)
	}
}

func testWaitForget(t *testing.T, e *env) {
	e.claim(req("k1"), ledger.Claimed)
	done := e.waitAsync(e.ctx, e.l, "k1")
	if err := e.l.Forget(e.ctx, "t1", "k1", true); err != nil {
		t.Fatal(err)
	}
	if got := <-done; !errors.Is(got.err, ledger.ErrNotFound) {
		t.Fatalf("Wait on a forgotten record: %v, want not found", got.err)
	}
}

func testSessionOrder(t *testing.T, e *env) {
	// Arrivals in s1 interleaved with s2 and with another tenant's s1.
	tokens := map[string]string{}
	for i, k := range []string{"e", "c", "a", "d", "b"} {
		c := e.claim(req(k), ledger.Claimed)
		tokens[k] = c.Token
		other := req(fmt.Sprintf("x%d", i))
		other.Session = "s2"
		e.claim(other, ledger.Claimed)
		foreign := req(k)
		foreign.Tenant = "t2"
		e.claim(foreign, ledger.Claimed)
	}
	list := func(after uint64, limit int) []ledger.Record {
		t.Helper()
		recs, err := e.l.Session(e.ctx, "t1", "s1", after, limit)
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	all := list(0, 0)
	if got := keys(all); !slices.Equal(got, []string{"e", "c", "a", "d", "b"}) {
		t.Fatalf("session s1 lists %v, want arrival order [e c a d b]", got)
	}
	for _, r := range all {
		if r.Token != "" {
			t.Fatalf("listing revealed a lease token")
		}
	}
	if got := keys(list(all[1].Seq, 0)); !slices.Equal(got, []string{"a", "d", "b"}) {
		t.Errorf("since c's seq: %v, want [a d b]", got)
	}
	if got := keys(list(0, 2)); !slices.Equal(got, []string{"e", "c"}) {
		t.Errorf("limit 2: %v, want [e c]", got)
	}
	if got := list(all[4].Seq, 0); len(got) != 0 {
		t.Errorf("since the last seq: %v, want nothing", keys(got))
	}
	// Completing keeps a record's place; forgetting removes it; a new
	// claim after a transient failure is a new arrival.
	e.complete("t1", "c", tokens["c"], `1`)
	if err := e.l.Forget(e.ctx, "t1", "a", true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.Fail(e.ctx, "t1", "e", tokens["e"], json.RawMessage(`1`), ledger.ClassTransient); err != nil {
		t.Fatal(err)
	}
	again := e.claim(req("e"), ledger.Claimed)
	after := list(0, 0)
	if got := keys(after); !slices.Equal(got, []string{"c", "d", "b", "e"}) {
		t.Fatalf("after complete/forget/re-claim: %v, want [c d b e]", got)
	}
	if after[3].Seq != again.Record.Seq || after[3].Seq <= all[4].Seq || after[0].Seq != all[1].Seq {
		t.Errorf("seqs: re-claim %d (claim said %d, last was %d), completed c %d (was %d)",
			after[3].Seq, again.Record.Seq, all[4].Seq, after[0].Seq, all[1].Seq)
	}
}

func testWorkflowListing(t *testing.T, e *env) {
	for i, step := range []string{"charge", "email", "ship"} {
		r := req("w1:" + step + ":tool")
		r.Step = step
		c := e.claim(r, ledger.Claimed)
		if i == 0 {
			e.complete("t1", r.Key, c.Token, `1`)
		}
		other := req("w2:" + step + ":tool")
		other.Workflow = "w2"
		e.claim(other, ledger.Claimed)
		e.clock.Advance(time.Millisecond)
	}
	recs, err := e.l.Workflow(e.ctx, "t1", "w1")
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(recs); !slices.Equal(got, []string{"w1:charge:tool", "w1:email:tool", "w1:ship:tool"}) {
		t.Fatalf("workflow w1 lists %v", got)
	}
	if recs[0].Status != ledger.StatusSuccess || recs[1].Status != ledger.StatusPending {
		t.Errorf("statuses %v %v, want SUCCESS PENDING", recs[0].Status, recs[1].Status)
	}
	if recs, _ := e.l.Workflow(e.ctx, "t2", "w1"); len(recs) != 0 {
		t.Errorf("tenant t2 sees t1's workflow: %v", keys(recs))
	}
}

func testTenants(t *testing.T, e *env) {
	r1, r2 := req("shared"), req("shared")
	r2.Tenant = "t2"
	c1 := e.claim(r1, ledger.Claimed)
	c2 := e.claim(r2, ledger.Claimed)
	if c1.Token == c2.Token {
		t.Fatal("two tenants got one token")
	}
	_, err := e.l.Complete(e.ctx, "t2", "shared", c1.Token, json.RawMessage(`"t1's"`))
	wantErr(t, "Complete in t2 with t1's token", err, ledger.ErrStaleToken)
	e.complete("t1", "shared", c1.Token, `"t1's"`)
	if got := e.get("t2", "shared"); got.Outcome != ledger.InProgress || got.Record.Tenant != "t2" {
		t.Errorf("t2's record is %v in tenant %q after t1 completed", got.Outcome, got.Record.Tenant)
	}
	if err := e.l.Forget(e.ctx, "t1", "shared", false); err != nil {
		t.Fatal(err)
	}
	if got := e.get("t2", "shared"); got.Outcome != ledger.InProgress {
		t.Errorf("forgetting in t1 touched t2: %v", got.Outcome)
	}
	// A tenant id that is a prefix of another's does not share records.
	r3 := req("shared")
	r3.Tenant = "t"
	e.claim(r3, ledger.Claimed)
	for _, tenant := range []string{"t", "t2"} {
		recs, err := e.l.Session(e.ctx, tenant, "s1", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 || recs[0].Tenant != tenant {
			t.Errorf("tenant %s session lists %d records", tenant, len(recs))
		}
	}
}

func testForget(t *testing.T, e *env) {
	c := e.claim(req("k1"), ledger.Claimed)
	e.complete("t1", "k1", c.Token, `"wrong"`)
	if err := e.l.Forget(e.ctx, "t1", "k1", false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.Get(e.ctx, "t1", "k1"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Get after Forget: %v", err)
	}
	if recs, _ := e.l.Workflow(e.ctx, "t1", "w1"); len(recs) != 0 {
		t.Errorf("workflow still lists the forgotten record")
	}
	again := e.claim(req("k1"), ledger.Claimed)
	if again.Previous != nil {
		t.Errorf("claim after Forget has a previous record")
	}
	_, err := e.l.Complete(e.ctx, "t1", "k1", c.Token, json.RawMessage(`1`))
	wantErr(t, "Complete with the forgotten claim's token", err, ledger.ErrStaleToken)
}

// testForgetLive: forgetting a record whose call runs under a live lease
// would let it run twice: refused unless forced; an uncertain or finished
// record is forgotten at once.
func testForgetLive(t *testing.T, e *env) {
	c := e.claim(req("k1"), ledger.Claimed)
	wantErr(t, "Forget of a live lease", e.l.Forget(e.ctx, "t1", "k1", false), ledger.ErrInProgress)
	e.claim(req("k1"), ledger.InProgress)
	if err := e.l.Forget(e.ctx, "t1", "k1", true); err != nil {
		t.Fatalf("forced Forget: %v", err)
	}
	_, err := e.l.Complete(e.ctx, "t1", "k1", c.Token, json.RawMessage(`1`))
	wantErr(t, "Complete after a forced Forget", err, ledger.ErrNotFound)
	e.claim(req("k2"), ledger.Claimed)
	e.clock.Advance(lease)
	if err := e.l.Forget(e.ctx, "t1", "k2", false); err != nil {
		t.Fatalf("Forget of an uncertain record: %v", err)
	}
}
