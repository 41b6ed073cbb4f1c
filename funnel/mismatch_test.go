package funnel

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/ledger"
)

func TestExplicitKeyMismatch(t *testing.T) {
	t.Run("other identity fields are refused by default", func(t *testing.T) {
		e := newEnv(t, options{})
		e.run(t, Request{Key: "order-77", Tool: "charge", Arguments: []byte(`{"amount":50,"card":"c-1","note":"first try"}`)}, `{"ok":true}`)
		_, err := e.f.Check(context.Background(), Request{Tenant: "acme", Session: "s1", Key: "order-77", Tool: "charge",
			Arguments: []byte(`{"amount":60,"card":"c-1","note":"first try"}`)})
		if !errors.Is(err, ErrKeyReuse) || !strings.Contains(err.Error(), "amount") || strings.Contains(err.Error(), "card") {
			t.Errorf("err = %v, want ErrKeyReuse naming amount only", err)
		}
	})
	t.Run("a reworded text replays", func(t *testing.T) {
		e := newEnv(t, options{})
		e.run(t, Request{Key: "mail-1", Tool: "send_email", Arguments: []byte(invoice)}, `{"message_id":"m-1"}`)
		res := e.check(t, Request{Key: "mail-1", Tool: "send_email", Arguments: []byte(invoiceReworded)})
		want(t, res, Duplicate, StageKey)
		if len(res.Notes) == 0 || !strings.Contains(res.Notes[0], "identity fields are equal") {
			t.Errorf("notes %v", res.Notes)
		}
	})
	t.Run("strict false replays, with a note naming the fields", func(t *testing.T) {
		p := DefaultPolicy()
		p.Strict = false
		e := newEnv(t, options{policies: []Policy{p}})
		e.run(t, Request{Key: "order-77", Tool: "charge", Arguments: []byte(`{"amount":50}`)}, `{"ok":true}`)
		res := e.check(t, Request{Key: "order-77", Tool: "charge", Arguments: []byte(`{"amount":60}`)})
		want(t, res, Duplicate, StageKey)
		if len(res.Notes) == 0 || !strings.Contains(res.Notes[0], "identity fields differ: amount") {
			t.Errorf("notes %v", res.Notes)
		}
	})
	t.Run("a transient failure under the key runs the new call", func(t *testing.T) {
		e := newEnv(t, options{})
		first := e.check(t, Request{Key: "order-78", Tool: "charge", Arguments: []byte(`{"amount":50}`)})
		if _, err := e.ledger.Fail(context.Background(), "acme", first.Key, first.Token, []byte(`"timeout"`), ledger.ClassTransient); err != nil {
			t.Fatal(err)
		}
		want(t, e.check(t, Request{Key: "order-78", Tool: "charge", Arguments: []byte(`{"amount":60}`)}), Execute, StageNew)
	})
}

func TestPositionalKeyMismatch(t *testing.T) {
	other := `{"to":"bob@example.com","subject":"Your invoice for May","body":"Hi Bob, your invoice for May is attached. Best, Bob"}`
	t.Run("other identity fields confirm, naming them", func(t *testing.T) {
		e := newEnv(t, options{})
		first := e.run(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice)}, `{"message_id":"m-1"}`)
		res := e.check(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(other), Attempt: Attempt{Kind: Transient, Number: 2}})
		want(t, res, Confirm, StageKey)
		if !strings.Contains(res.Reason, "identity fields differ: to)") || res.Match == nil || res.Match.Key != first.Key {
			t.Errorf("reason %q, match %+v", res.Reason, res.Match)
		}
		if res.Match != nil && res.Match.Result != nil {
			t.Errorf("the confirm hands back the other call's result %s", res.Match.Result)
		}
	})
	t.Run("a call in progress with other identity fields confirms", func(t *testing.T) {
		e := newEnv(t, options{})
		e.check(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice)})
		want(t, e.check(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(other)}), Confirm, StageKey)
	})
	t.Run("on_key_mismatch replay keeps the replay", func(t *testing.T) {
		p := DefaultPolicy()
		p.OnKeyMismatch = ActionReplay
		e := newEnv(t, options{policies: []Policy{p}})
		e.run(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice)}, `{"message_id":"m-1"}`)
		res := e.check(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(other)})
		want(t, res, Duplicate, StageKey)
		if string(res.Match.Result) != `{"message_id":"m-1"}` || len(res.Notes) == 0 || !strings.Contains(res.Notes[0], "identity fields differ: to") {
			t.Errorf("result %s, notes %v", res.Match.Result, res.Notes)
		}
	})
}

func TestInProgressCarriesTheLeaseEnd(t *testing.T) {
	e := newEnv(t, options{})
	first := e.check(t, Request{Key: "k-run", Tool: "charge", Arguments: []byte(`{"amount":1}`)})
	res := e.check(t, Request{Key: "k-run", Tool: "charge", Arguments: []byte(`{"amount":1}`)})
	want(t, res, InProgress, StageKey)
	if !res.LeaseExpiresAt.Equal(first.LeaseUntil) || res.LeaseExpiresAt.IsZero() {
		t.Errorf("lease_expires_at %v, want the claim's lease end %v", res.LeaseExpiresAt, first.LeaseUntil)
	}
	e.clock.advance(time.Hour)
	if res := e.check(t, Request{Key: "k-run", Tool: "charge", Arguments: []byte(`{"amount":1}`)}); !res.LeaseExpiresAt.IsZero() {
		t.Errorf("an uncertain answer carries lease_expires_at %v", res.LeaseExpiresAt)
	}
}

func TestIdentityDiff(t *testing.T) {
	cn, err := canon.New(canon.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	call := func(args string) *canon.Call {
		c, err := cn.Canonicalize("book", []byte(args))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cases := []struct {
		name, a, b string
		want       []string
	}{
		{"equal", `{"city":"Paris","n":2}`, `{"n":2,"city":"Paris"}`, nil},
		{"changed", `{"city":"Paris","n":2}`, `{"city":"London","n":2}`, []string{"city"}},
		{"added and removed", `{"city":"Paris","n":2}`, `{"city":"Paris","time":"19:30"}`, []string{"n", "time"}},
		{"restated time is equal", `{"time":"19:30"}`, `{"time":"7:30 pm"}`, nil},
		{"text is not identity", `{"city":"Paris","note":"a table by the window please, we are celebrating"}`, `{"city":"Paris","note":"by the window if you can, it is an anniversary"}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := identityDiff(call(tc.a), call(tc.b)); !slices.Equal(got, tc.want) {
				t.Errorf("identityDiff = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOnKeyMismatchIsValidated(t *testing.T) {
	p := DefaultPolicy()
	p.OnKeyMismatch = ActionWarn
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "on_key_mismatch") {
		t.Errorf("on_key_mismatch warn: %v, want an error naming it", err)
	}
	p.OnKeyMismatch = ""
	if err := p.Validate(); err != nil {
		t.Errorf("an unset on_key_mismatch: %v", err)
	}
}
