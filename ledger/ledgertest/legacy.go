package ledgertest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/idem-dev/idem/ledger"
)

// testLegacyKeys: records written before explicit keys had their
// namespace, under the caller's key as it was given, stay readable
// through the key KeyFor now derives, for the tool that wrote them only;
// a position's record is never read as an explicit key's.
func testLegacyKeys(t *testing.T, e *env) {
	old := func(key, tool, workflow, step string) ledger.Claim {
		r := req(key) // written as the previous version wrote it: the raw key
		r.Tool, r.Workflow, r.Step = tool, workflow, step
		return e.claim(r, ledger.Claimed)
	}
	key := func(explicit, tool string) string {
		k, err := ledger.KeyFor(ledger.KeyInput{IdempotencyKey: explicit, Tool: tool})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	done := old("order-77", "ship", "w1", "1")
	e.complete("t1", "order-77", done.Token, `"shipped"`)
	got := e.get("t1", key("order-77", "ship"))
	if got.Outcome != ledger.Duplicate || string(got.Record.Result) != `"shipped"` || got.Record.Key != "order-77" {
		t.Fatalf("the old record through the new key: %v %s key %q", got.Outcome, got.Record.Result, got.Record.Key)
	}
	_, err := e.l.Get(e.ctx, "t1", key("order-77", "refund"))
	wantErr(t, "the old record through another tool's key", err, ledger.ErrNotFound)

	// A position's record is not an explicit key's, even of its own tool.
	pos := old("w1:2:ship", "ship", "w1", "2")
	e.complete("t1", "w1:2:ship", pos.Token, `"positional"`)
	_, err = e.l.Get(e.ctx, "t1", key("w1:2:ship", "ship"))
	wantErr(t, "a position's record through an explicit key", err, ledger.ErrNotFound)

	// A pending old record: waited on where it is stored, and forgotten
	// through the new key.
	pending := old("pay-1", "charge", "", "")
	newKey := key("pay-1", "charge")
	if got := e.get("t1", newKey); got.Outcome != ledger.InProgress {
		t.Fatalf("a pending old record: %v", got.Outcome)
	}
	done2 := e.waitAsync(e.ctx, e.l, newKey)
	e.complete("t1", "pay-1", pending.Token, `"paid"`)
	if w := <-done2; w.err != nil || w.c.Outcome != ledger.Duplicate || string(w.c.Record.Result) != `"paid"` {
		t.Fatalf("waiting on a pending old record: %v %v", w.c.Outcome, w.err)
	}
	if err := e.l.Forget(e.ctx, "t1", newKey, false); err != nil {
		t.Fatalf("Forget through the new key: %v", err)
	}
	if _, err := e.l.Get(e.ctx, "t1", "pay-1"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("the old record after Forget: %v", err)
	}
	// A new claim takes the new key; the old form is never written again.
	c := e.claim(ledger.ClaimRequest{Tenant: "t1", Key: newKey, Session: "s1", Tool: "charge"}, ledger.Claimed)
	if _, err := e.l.Complete(e.ctx, "t1", newKey, c.Token, json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
}
