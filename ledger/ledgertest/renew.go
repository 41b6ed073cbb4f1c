package ledgertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/ledger"
)

// renew renews (tenant t1) and fails the test on an error.
func (e *env) renew(key, token string, d time.Duration) ledger.Record {
	e.t.Helper()
	rec, err := e.l.Renew(e.ctx, "t1", key, token, d)
	if err != nil {
		e.t.Fatalf("Renew(%q): %v", key, err)
	}
	return rec
}

// testRenew: a holder that renews keeps its key past the first lease: no
// claim sees it uncertain, and its result is the one recorded.
func testRenew(t *testing.T, e *env) {
	start := e.clock.Now()
	c := e.claim(req("k1"), ledger.Claimed)
	e.clock.Advance(lease - 10*time.Second)
	rec := e.renew("k1", c.Token, lease)
	if want := e.clock.Now().Add(lease).UnixMilli(); rec.LeaseUntil != want || rec.Token != "" || rec.Status != ledger.StatusPending {
		t.Fatalf("renewed record: lease %d token %q status %v, want lease %d, no token, PENDING", rec.LeaseUntil, rec.Token, rec.Status, want)
	}
	if rec.UpdatedAt != start.UnixMilli() {
		t.Errorf("a renewal moved UpdatedAt from the claim's %d to %d", start.UnixMilli(), rec.UpdatedAt)
	}
	e.clock.Advance(30 * time.Second) // past the first lease, within the renewed one
	if got := e.get("t1", "k1"); got.Outcome != ledger.InProgress || got.Record.LeaseUntil != rec.LeaseUntil {
		t.Fatalf("after the first lease ended: %v, lease %d; want in progress until %d", got.Outcome, got.Record.LeaseUntil, rec.LeaseUntil)
	}
	e.claim(req("k1"), ledger.InProgress)
	if tk, err := e.l.Takeover(e.ctx, req("k1")); err != nil || tk.Outcome != ledger.InProgress {
		t.Fatalf("takeover of a renewed lease: %v %v, want in progress", tk.Outcome, err)
	}
	// Asking for less than is left shortens nothing.
	if again := e.renew("k1", c.Token, time.Second); again.LeaseUntil != rec.LeaseUntil {
		t.Errorf("a shorter renewal moved the lease from %d to %d", rec.LeaseUntil, again.LeaseUntil)
	}
	e.complete("t1", "k1", c.Token, `"the long call's result"`)
	if got := e.claim(req("k1"), ledger.Duplicate); string(got.Record.Result) != `"the long call's result"` {
		t.Errorf("result %s", got.Record.Result)
	}
	// A zero lease asks for Config.Lease.
	d := e.claim(req("k2"), ledger.Claimed)
	e.clock.Advance(time.Second)
	if rec := e.renew("k2", d.Token, 0); rec.LeaseUntil != e.clock.Now().Add(lease).UnixMilli() {
		t.Errorf("renewal with lease 0 ends at %d, want now + %v", rec.LeaseUntil, lease)
	}
}

// testRenewStale: only the current token renews, only a PENDING record.
func testRenewStale(t *testing.T, e *env) {
	a := e.claim(req("k1"), ledger.Claimed)
	_, err := e.l.Renew(e.ctx, "t1", "k1", "not-the-token", lease)
	wantErr(t, "Renew with a wrong token", err, ledger.ErrStaleToken)
	e.clock.Advance(lease)
	b, err := e.l.Takeover(e.ctx, req("k1"))
	if err != nil || b.Outcome != ledger.Claimed {
		t.Fatalf("Takeover: %v %v", b.Outcome, err)
	}
	rec, err := e.l.Renew(e.ctx, "t1", "k1", a.Token, lease)
	wantErr(t, "Renew with the taken-over token", err, ledger.ErrStaleToken)
	if rec.Status != ledger.StatusPending || rec.Token != "" || rec.LeaseUntil != b.Record.LeaseUntil {
		t.Errorf("a refused renewal returned %+v, want B's record as it stands, without its token", rec)
	}
	e.complete("t1", "k1", b.Token, `1`)
	_, err = e.l.Renew(e.ctx, "t1", "k1", b.Token, lease)
	wantErr(t, "Renew of a completed record", err, ledger.ErrNotPending)
	_, err = e.l.Renew(e.ctx, "t1", "nope", "tok", lease)
	wantErr(t, "Renew of an unknown key", err, ledger.ErrNotFound)
	for _, tc := range []struct {
		name, key, token string
		lease            time.Duration
		field            string
	}{
		{"empty token", "k1", "", lease, "token"},
		{"negative lease", "k1", b.Token, -time.Second, "lease"},
		{"empty key", "", b.Token, lease, "key"},
	} {
		_, err := e.l.Renew(e.ctx, "t1", tc.key, tc.token, tc.lease)
		if fe, ok := errors.AsType[*ledger.FieldError](err); !ok || fe.Field != tc.field {
			t.Errorf("Renew with %s: %v, want a field error naming %s", tc.name, err, tc.field)
		}
	}
}

// testRenewExpired: a lease that ran out may still be renewed by its
// holder while nobody has taken it over; then it is in progress again.
func testRenewExpired(t *testing.T, e *env) {
	a := e.claim(req("k1"), ledger.Claimed)
	e.clock.Advance(lease + time.Second)
	e.claim(req("k1"), ledger.Uncertain)
	rec := e.renew("k1", a.Token, lease)
	if rec.LeaseUntil != e.clock.Now().Add(lease).UnixMilli() {
		t.Errorf("renewed lease ends %d, want now + lease", rec.LeaseUntil)
	}
	e.claim(req("k1"), ledger.InProgress)
	if got := e.get("t1", "k1"); got.Outcome != ledger.InProgress {
		t.Errorf("after renewing an expired lease: %v, want in progress", got.Outcome)
	}
}

// testRenewMaxLease: neither a claim nor its renewals hold a key past
// MaxLease after the claim.
func testRenewMaxLease(t *testing.T, e *env) {
	start := e.clock.Now()
	c := e.claim(req("k1"), ledger.Claimed)
	e.clock.Advance(lease / 2)
	rec := e.renew("k1", c.Token, time.Hour)
	if want := start.Add(maxLease).UnixMilli(); rec.LeaseUntil != want {
		t.Errorf("renewal asking for an hour ends %d, want the claim + MaxLease %d", rec.LeaseUntil, want)
	}
	e.clock.Advance(maxLease - lease/2)
	_, err := e.l.Renew(e.ctx, "t1", "k1", c.Token, lease)
	wantErr(t, "Renew at MaxLease", err, ledger.ErrLeaseLimit)
	e.claim(req("k1"), ledger.Uncertain)
	// The holder may still record its outcome while nobody took it over.
	e.complete("t1", "k1", c.Token, `"done at last"`)

	long := req("k2")
	long.Lease = 24 * time.Hour
	got := e.claim(long, ledger.Claimed)
	if want := e.clock.Now().Add(maxLease).UnixMilli(); got.Record.LeaseUntil != want {
		t.Errorf("a claim asking for a 24 h lease holds it until %d, want now + MaxLease %d", got.Record.LeaseUntil, want)
	}
	// A takeover restarts the bound: the new holder's claim time counts.
	e.clock.Advance(maxLease)
	tk, err := e.l.Takeover(e.ctx, req("k2"))
	if err != nil || tk.Outcome != ledger.Claimed {
		t.Fatalf("Takeover: %v %v", tk.Outcome, err)
	}
	e.clock.Advance(lease / 2)
	if rec := e.renew("k2", tk.Token, lease); rec.LeaseUntil != e.clock.Now().Add(lease).UnixMilli() {
		t.Errorf("renewal after a takeover ends %d, want now + lease", rec.LeaseUntil)
	}
}

// testRenewVsTakeover: a holder renewing an expired lease while another
// claimant takes it over: for every key exactly one of them wins, and
// the record says which.
func testRenewVsTakeover(t *testing.T, e *env) {
	const nkeys = 24
	tokens := make([]string, nkeys)
	for i := range nkeys {
		tokens[i] = e.claim(req(fmt.Sprintf("k%02d", i)), ledger.Claimed).Token
	}
	e.clock.Advance(lease + time.Second)
	type outcome struct {
		renewed  bool
		renewErr error
		takeover ledger.Claim
		err      error
	}
	outs := make([]outcome, nkeys)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range nkeys {
		key := fmt.Sprintf("k%02d", i)
		wg.Go(func() {
			<-start
			_, err := e.l.Renew(e.ctx, "t1", key, tokens[i], lease)
			outs[i].renewed, outs[i].renewErr = err == nil, err
		})
		wg.Go(func() {
			<-start
			outs[i].takeover, outs[i].err = e.l.Takeover(e.ctx, req(key))
		})
	}
	close(start)
	wg.Wait()
	renewals := 0
	for i, o := range outs {
		key := fmt.Sprintf("k%02d", i)
		if o.err != nil {
			t.Fatalf("%s: Takeover: %v", key, o.err)
		}
		took := o.takeover.Outcome == ledger.Claimed
		switch {
		case o.renewed && took:
			t.Errorf("%s: both the renewal and the takeover won", key)
		case !o.renewed && !took:
			t.Errorf("%s: neither won (renew: %v, takeover: %v)", key, o.renewErr, o.takeover.Outcome)
		case o.renewed:
			renewals++
			if o.takeover.Outcome != ledger.InProgress {
				t.Errorf("%s: the takeover lost to the renewal with %v, want in progress", key, o.takeover.Outcome)
			}
		case !errors.Is(o.renewErr, ledger.ErrStaleToken):
			t.Errorf("%s: the renewal lost to the takeover with %v, want a stale token", key, o.renewErr)
		}
		// The record's holder is the winner: only its token completes.
		winner, loser := tokens[i], o.takeover.Token
		if took {
			winner, loser = o.takeover.Token, tokens[i]
		}
		if loser != "" { // a takeover that lost holds no token
			if _, err := e.l.Complete(e.ctx, "t1", key, loser, json.RawMessage(`"loser"`)); !errors.Is(err, ledger.ErrStaleToken) {
				t.Errorf("%s: the loser completed: %v", key, err)
			}
		}
		e.complete("t1", key, winner, `"winner"`)
	}
	t.Logf("%d of %d races won by the renewal", renewals, nkeys)
}
