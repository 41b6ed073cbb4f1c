package ledgertest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/idem-dev/idem/ledger"
)

// Corrupt checks what a store does with a record damaged at rest: open
// returns a fresh store (as for Run), and damage corrupts the stored
// record of (tenant, key) in it, as a disk or a bad write would. Reads and
// writes of the key report a *ledger.CorruptError naming it; listings of
// its session and workflow skip it and show the rest; Forget removes it,
// and the key may then be claimed again.
func Corrupt(t *testing.T, open func(t *testing.T) ledger.Store, damage func(t *testing.T, s ledger.Store, tenant, key string)) {
	e := newEnv(t, open)
	for _, k := range []string{"good-1", "bad", "good-2"} {
		c := e.claim(req(k), ledger.Claimed)
		e.complete("t1", k, c.Token, `"ok"`)
	}
	damage(t, e.store, "t1", "bad")
	named := func(op string, err error) {
		t.Helper()
		ce, ok := errors.AsType[*ledger.CorruptError](err)
		if !ok || ce.Key != "bad" || !errors.Is(err, ledger.ErrCorrupt) {
			t.Errorf("%s of the corrupt record: %v, want a *CorruptError naming its key", op, err)
		}
	}
	_, err := e.l.Get(e.ctx, "t1", "bad")
	named("Get", err)
	_, err = e.l.Claim(e.ctx, req("bad"))
	named("Claim", err)
	_, err = e.l.Complete(e.ctx, "t1", "bad", "tok", json.RawMessage(`1`))
	named("Complete", err)
	_, err = e.l.Renew(e.ctx, "t1", "bad", "tok", lease)
	named("Renew", err)
	recs, err := e.l.Session(e.ctx, "t1", "s1", 0, 0)
	if got := keys(recs); err != nil || len(got) != 2 || got[0] != "good-1" || got[1] != "good-2" {
		t.Errorf("session listing: %v %v, want the two good records", got, err)
	}
	recs, err = e.l.Workflow(e.ctx, "t1", "w1")
	if got := keys(recs); err != nil || len(got) != 2 {
		t.Errorf("workflow listing: %v %v, want the two good records", got, err)
	}
	if err := e.l.Forget(e.ctx, "t1", "bad", false); err != nil {
		t.Fatalf("Forget of the corrupt record: %v", err)
	}
	_, err = e.l.Get(e.ctx, "t1", "bad")
	wantErr(t, "Get after Forget", err, ledger.ErrNotFound)
	c := e.claim(req("bad"), ledger.Claimed)
	e.complete("t1", "bad", c.Token, `"again"`)
	if recs, err := e.l.Session(e.ctx, "t1", "s1", 0, 0); err != nil || len(recs) != 3 {
		t.Errorf("session after the key ran again: %v %v", keys(recs), err)
	}
}
