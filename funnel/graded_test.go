package funnel

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/ledger"
)

// The graded identity gate: an earlier call whose identity values the new
// one restates (probable, not certain) is asked about, never replayed;
// traps stay different; a confirmed call runs once.

var friday = canon.Date{Year: 2019, Month: time.March, Day: 1}

func replayPolicy() Policy {
	p := DefaultPolicy()
	p.OnDuplicate = ActionReplay
	return p
}

func TestRestatedIdentityIsAskedAboutNeverReplayed(t *testing.T) {
	cases := []struct {
		name, tool, first, second, reading string
	}{
		{"a date without its year", "book_table", `{"restaurant":"Sino","date":"2019-03-04","time":"19:30"}`,
			`{"restaurant":"Sino","date":"March 4th","time":"19:30"}`, "year"},
		{"case in a multi-word name", "book_table", `{"restaurant":"Tandoori Mahal","address":"1355 Broadway","time":"19:30"}`,
			`{"restaurant":"Tandoori Mahal","address":"1355 broadway","time":"19:30"}`, "case"},
		{"a currency sign against a bare amount", "transfer", `{"to_account":"DE89370400440532013000","amount":"122"}`,
			`{"to_account":"DE89370400440532013000","amount":"$122"}`, "currency"},
		{"a shortened name", "book_table", `{"restaurant":"Tandoori Mahal Indian Restaurant","city":"San Francisco","time":"19:30"}`,
			`{"restaurant":"Tandoori Mahal","city":"San Fran","time":"19:30"}`, ""},
		{"a qualifier", "find_flights", `{"origin":"Seattle","destination":"Boston","date":"2019-03-04"}`,
			`{"origin":"Seattle, WA","destination":"Boston","date":"2019-03-04"}`, "qualifier"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, options{policies: []Policy{replayPolicy()}})
			e.run(t, Request{Step: "1", Tool: tc.tool, Today: friday, Arguments: []byte(tc.first)}, `{"ok":true}`)
			res := e.check(t, Request{Step: "2", Tool: tc.tool, Today: friday, Arguments: []byte(tc.second)})
			want(t, res, Confirm, StageSemantic)
			notes := strings.Join(res.Notes, "\n")
			if !strings.Contains(notes, "identity restated (probable, "+tc.reading) {
				t.Errorf("notes %q do not name the %q reading", notes, tc.reading)
			}
			if res.Match == nil || res.Match.Key != "wf:1:"+tc.tool || res.Match.Result != nil && res.Decision == Duplicate {
				t.Errorf("match %+v", res.Match)
			}
			// Under strict identity the restated values are different
			// values; under lenient they are equal ones.
			strict := replayPolicy()
			strict.Identity = IdentityStrict
			es := newEnv(t, options{policies: []Policy{strict}})
			es.run(t, Request{Step: "1", Tool: tc.tool, Today: friday, Arguments: []byte(tc.first)}, `{"ok":true}`)
			want(t, es.check(t, Request{Step: "2", Tool: tc.tool, Today: friday, Arguments: []byte(tc.second)}), Execute, StageNew)
			lenient := replayPolicy()
			lenient.Identity = IdentityLenient
			el := newEnv(t, options{policies: []Policy{lenient}})
			el.run(t, Request{Step: "1", Tool: tc.tool, Today: friday, Arguments: []byte(tc.first)}, `{"ok":true}`)
			want(t, el.check(t, Request{Step: "2", Tool: tc.tool, Today: friday, Arguments: []byte(tc.second)}), Duplicate, StageSemantic)
		})
	}
}

func TestIdentityTrapsStayDifferent(t *testing.T) {
	cases := []struct {
		name, tool, first, second string
	}{
		{"one hour later", "book_table", `{"restaurant":"Sino","date":"2019-03-04","time":"19:30"}`, `{"restaurant":"Sino","date":"2019-03-04","time":"20:30"}`},
		{"another day", "book_table", `{"restaurant":"Sino","date":"2019-03-04","time":"19:30"}`, `{"restaurant":"Sino","date":"March 5th","time":"19:30"}`},
		{"day and month swapped", "book_table", `{"restaurant":"Sino","date":"2019-03-04","time":"19:30"}`, `{"restaurant":"Sino","date":"2019-04-03","time":"19:30"}`},
		{"another currency", "transfer", `{"to_account":"DE89370400440532013000","amount":"$122"}`, `{"to_account":"DE89370400440532013000","amount":"€122"}`},
		{"another city of the same saint", "find_flights", `{"origin":"Santa Rosa","destination":"Boston","date":"2019-03-04"}`,
			`{"origin":"Santa Clara","destination":"Boston","date":"2019-03-04"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, options{policies: []Policy{replayPolicy()}})
			e.run(t, Request{Step: "1", Tool: tc.tool, Today: friday, Arguments: []byte(tc.first)}, `{"ok":true}`)
			want(t, e.check(t, Request{Step: "2", Tool: tc.tool, Today: friday, Arguments: []byte(tc.second)}), Execute, StageNew)
		})
	}
}

// TestRestatedGoesToTheJudgeFirst: with a judge configured, a restated
// pair is the judge's to decide: a distinct verdict lets it execute, a
// duplicate one asks (never replays).
func TestRestatedGoesToTheJudgeFirst(t *testing.T) {
	first := `{"restaurant":"Sino","date":"2019-03-04","time":"19:30"}`
	second := `{"restaurant":"Sino","date":"March 4th","time":"19:30"}`
	for _, dup := range []bool{false, true} {
		var calls atomic.Int32
		e := newEnv(t, options{policies: []Policy{replayPolicy()}, judge: judgeServer(t, dup, 0, &calls)})
		e.run(t, Request{Step: "1", Tool: "book_table", Today: friday, Arguments: []byte(first)}, `{"ok":true}`)
		res := e.check(t, Request{Step: "2", Tool: "book_table", Today: friday, Arguments: []byte(second)})
		if calls.Load() != 1 {
			t.Errorf("judge asked %d times, want once", calls.Load())
		}
		if dup {
			want(t, res, Confirm, StageJudge)
		} else {
			want(t, res, Execute, StageNew)
		}
	}
}

// TestConfirmedRunsOnce: after a confirm, the agent says the call is
// another action (confirmed: the match's key): it executes, and the same
// call confirmed again is a duplicate of that execution.
func TestConfirmedRunsOnce(t *testing.T) {
	e := newEnv(t, options{})
	e.run(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice)}, `{"message_id":"m-1"}`)
	asked := e.check(t, Request{Step: "2", Tool: "send_email", Arguments: []byte(invoiceReworded)})
	want(t, asked, Confirm, StageSemantic)
	confirmed := e.check(t, Request{Step: "2", Tool: "send_email", Arguments: []byte(invoiceReworded), Confirmed: asked.Match.Key})
	want(t, confirmed, Execute, StageNew)
	if !strings.Contains(strings.Join(confirmed.Notes, "\n"), "confirmed as another action than the earlier call "+asked.Match.Key) {
		t.Errorf("notes %q do not record the confirmation", confirmed.Notes)
	}
	rec, err := e.ledger.Complete(context.Background(), "acme", confirmed.Key, confirmed.Token, json.RawMessage(`{"message_id":"m-2"}`))
	if err != nil {
		t.Fatal(err)
	}
	// The executed call's record names the call it was confirmed distinct from.
	if rec.Confirmed != asked.Match.Key {
		t.Errorf("the confirmed execution's record has confirmed %q, want %q", rec.Confirmed, asked.Match.Key)
	}
	if got, err := e.ledger.Get(context.Background(), "acme", asked.Match.Key); err != nil || got.Record.Confirmed != "" {
		t.Errorf("the earlier call's record has confirmed %q (%v), want none", got.Record.Confirmed, err)
	}
	// The same confirmed call again, under another step: it repeats the
	// confirmed execution.
	again := e.check(t, Request{Step: "3", Tool: "send_email", Arguments: []byte(invoiceReworded), Confirmed: asked.Match.Key})
	want(t, again, Duplicate, StageExact)
	if string(again.Match.Result) != `{"message_id":"m-2"}` {
		t.Errorf("replayed %s, want the confirmed execution's result", again.Match.Result)
	}
	// A confirmed execution that died, taken over: the takeover's record
	// names the confirmation too.
	charge := Request{Step: "6", Tool: "charge", Arguments: []byte(`{"card":"tok_123","amount":50}`), Confirmed: asked.Match.Key}
	want(t, e.check(t, charge), Execute, StageNew)
	e.clock.advance(ledger.DefaultConfig().Lease + time.Second)
	charge.Takeover = true
	took := e.check(t, charge)
	want(t, took, Execute, StageKey)
	if got, err := e.ledger.Get(context.Background(), "acme", took.Key); err != nil || got.Record.Confirmed != asked.Match.Key {
		t.Errorf("the taken-over execution's record has confirmed %q (%v), want %q", got.Record.Confirmed, err, asked.Match.Key)
	}
	// A confirmation names a key: bad ones are the caller's error.
	if _, err := e.f.Check(context.Background(), Request{Tenant: "acme", Session: "s1", Workflow: "wf", Step: "4", Tool: "send_email",
		Arguments: []byte(invoice), Confirmed: "bad\nkey"}); err == nil || !strings.Contains(err.Error(), "confirmed") {
		t.Errorf("a confirmation with a control character: %v, want an error naming confirmed", err)
	}
}
