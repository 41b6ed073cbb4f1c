package ledgertest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/idem-dev/idem/ledger"
)

// confirmedKey is the earlier call the suite's confirmed claims name.
const confirmedKey = "w1:0:send_email"

// confirmed returns req(key) confirmed as another action than confirmedKey.
func confirmed(key string) ledger.ClaimRequest {
	r := req(key)
	r.Confirmed = confirmedKey
	return r
}

// testConfirmed: a claim confirmed as another action than an earlier call
// stores that call's key on its record, which keeps it through renewal,
// an embedding written later, completion and failure, and shows it in
// every listing and to a claim that loses to it; a claim without one
// stores none, also when it claims a key again after a confirmed
// execution failed; a takeover stores its own.
func testConfirmed(t *testing.T, e *env) {
	want := func(op string, rec ledger.Record, confirmed string) {
		t.Helper()
		if rec.Confirmed != confirmed {
			t.Errorf("%s: record confirmed %q, want %q", op, rec.Confirmed, confirmed)
		}
	}
	c := e.claim(confirmed("k1"), ledger.Claimed)
	want("claim", c.Record, confirmedKey)
	want("get after the claim", e.get("t1", "k1").Record, confirmedKey)
	want("renew", e.renew("k1", c.Token, 2*lease), confirmedKey)
	if err := e.l.SetEmbedding(e.ctx, "t1", "k1", c.Record.Seq, c.Record.Hash, "other-model", []float32{1, 0, 0, 0}); err != nil {
		t.Fatalf("SetEmbedding: %v", err)
	}
	want("get after SetEmbedding", e.get("t1", "k1").Record, confirmedKey)
	want("complete", e.complete("t1", "k1", c.Token, `{"id":"m-2"}`), confirmedKey)
	want("get after complete", e.get("t1", "k1").Record, confirmedKey)
	want("a claim that lost to it", e.claim(req("k1"), ledger.Duplicate).Record, confirmedKey)

	plain := e.claim(req("k2"), ledger.Claimed)
	want("claim without a confirmation", plain.Record, "")
	want("get of a claim without a confirmation", e.get("t1", "k2").Record, "")

	for _, tc := range []struct {
		key   string
		class ledger.ErrorClass
	}{{"k3", ledger.ClassTransient}, {"k4", ledger.ClassPermanent}} {
		f := e.claim(confirmed(tc.key), ledger.Claimed)
		rec, err := e.l.Fail(e.ctx, "t1", tc.key, f.Token, json.RawMessage(`{"status":503}`), tc.class)
		if err != nil {
			t.Fatalf("Fail %v: %v", tc.class, err)
		}
		want("fail "+tc.class.String(), rec, confirmedKey)
		want("get after fail "+tc.class.String(), e.get("t1", tc.key).Record, confirmedKey)
	}
	again := e.claim(req("k3"), ledger.Claimed) // a new execution, not confirmed
	want("a claim after a confirmed transient failure", again.Record, "")
	if again.Previous == nil {
		t.Fatal("the claim after a transient failure has no Previous")
	}
	want("the failed execution the claim replaced", *again.Previous, confirmedKey)

	recs, err := e.l.Session(e.ctx, "t1", "s1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	wf, err := e.l.Workflow(e.ctx, "t1", "w1")
	if err != nil {
		t.Fatal(err)
	}
	wantListed := map[string]string{"k1": confirmedKey, "k2": "", "k3": "", "k4": confirmedKey}
	for name, list := range map[string][]ledger.Record{"session": recs, "workflow": wf} {
		if len(list) != len(wantListed) {
			t.Fatalf("%s listing: keys %v, want %d", name, keys(list), len(wantListed))
		}
		for _, r := range list {
			want(name+" listing of "+r.Key, r, wantListed[r.Key])
		}
	}

	// A takeover of an uncertain execution is a claim: it stores its own.
	e.claim(req("k5"), ledger.Claimed)
	e.clock.Advance(3 * lease) // past every lease above
	tk, err := e.l.Takeover(e.ctx, confirmed("k5"))
	if err != nil || tk.Outcome != ledger.Claimed {
		t.Fatalf("Takeover: %v %v", tk.Outcome, err)
	}
	want("takeover", tk.Record, confirmedKey)
	want("get after the takeover", e.get("t1", "k5").Record, confirmedKey)
	e.clock.Advance(time.Millisecond)
	want("complete after the takeover", e.complete("t1", "k5", tk.Token, `1`), confirmedKey)
}
