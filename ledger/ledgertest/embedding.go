package ledgertest

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/idem-dev/idem/ledger"
)

// testSetEmbedding: an embedding written after the claim changes nothing
// but the embedding (status, result, Seq, lease stay), is kept when one of
// the model is there, and is refused for a record claimed anew.
func testSetEmbedding(t *testing.T, e *env) {
	r := req("k1")
	r.Embedding, r.EmbeddingModel = nil, ""
	c := e.claim(r, ledger.Claimed)
	e.complete("t1", "k1", c.Token, `{"ok":true}`)
	vec := []float32{0.5, 0.5, -0.5, 0.5}
	if err := e.l.SetEmbedding(e.ctx, "t1", "k1", c.Record.Seq, r.Hash, "use-lite", vec); err != nil {
		t.Fatalf("SetEmbedding: %v", err)
	}
	got := e.get("t1", "k1")
	if !slices.Equal(got.Record.Embedding, vec) || got.Record.EmbeddingModel != "use-lite" {
		t.Fatalf("embedding %v by %q, want %v by use-lite", got.Record.Embedding, got.Record.EmbeddingModel, vec)
	}
	if got.Outcome != ledger.Duplicate || string(got.Record.Result) != `{"ok":true}` || got.Record.Seq != c.Record.Seq {
		t.Fatalf("after SetEmbedding: %v, result %s, seq %d: want the completed record unchanged", got.Outcome, got.Record.Result, got.Record.Seq)
	}
	if recs, err := e.l.Session(e.ctx, "t1", "s1", 0, 0); err != nil || len(recs) != 1 || !slices.Equal(recs[0].Embedding, vec) {
		t.Fatalf("session listing after SetEmbedding: %d records (%v)", len(recs), err)
	}
	// One of the model is kept.
	if err := e.l.SetEmbedding(e.ctx, "t1", "k1", c.Record.Seq, r.Hash, "use-lite", []float32{1, 0, 0, 0}); err != nil {
		t.Fatalf("SetEmbedding again: %v", err)
	}
	if got := e.get("t1", "k1"); !slices.Equal(got.Record.Embedding, vec) {
		t.Fatalf("a second SetEmbedding replaced the first: %v", got.Record.Embedding)
	}
	// Another claim's Seq or hash, or no record: ErrNotFound, nothing written.
	wantErr(t, "SetEmbedding of another seq", e.l.SetEmbedding(e.ctx, "t1", "k1", c.Record.Seq+1, r.Hash, "other", vec), ledger.ErrNotFound)
	wantErr(t, "SetEmbedding of another hash", e.l.SetEmbedding(e.ctx, "t1", "k1", c.Record.Seq, r.Hash+1, "other", vec), ledger.ErrNotFound)
	wantErr(t, "SetEmbedding of no record", e.l.SetEmbedding(e.ctx, "t1", "nope", 1, r.Hash, "use-lite", vec), ledger.ErrNotFound)
	// A pending record keeps its lease and token.
	p := e.claim(req("k2"), ledger.Claimed)
	if err := e.l.SetEmbedding(e.ctx, "t1", "k2", p.Record.Seq, req("k2").Hash, "other-model", vec); err != nil {
		t.Fatal(err)
	}
	if got := e.get("t1", "k2"); got.Outcome != ledger.InProgress || got.Record.LeaseUntil != p.Record.LeaseUntil {
		t.Fatalf("pending record after SetEmbedding: %v, lease %d (was %d)", got.Outcome, got.Record.LeaseUntil, p.Record.LeaseUntil)
	}
	e.complete("t1", "k2", p.Token, `{}`) // the token still holds
	wantErr(t, "SetEmbedding with NaN", e.l.SetEmbedding(e.ctx, "t1", "k2", p.Record.Seq, req("k2").Hash, "m", []float32{float32(math.NaN())}), ledger.ErrInvalidInput)
}

// testRecentSessions: sessions come most recently written first, across
// tenants, up to the limit.
func testRecentSessions(t *testing.T, e *env) {
	if _, ok := e.store.(ledger.RecentSessionsStore); !ok {
		t.Skip("the store is not a ledger.RecentSessionsStore")
	}
	for i, s := range []struct{ tenant, session string }{{"t1", "old"}, {"t2", "middle"}, {"t1", "new"}} {
		r := req("k" + s.session)
		r.Tenant, r.Session = s.tenant, s.session
		e.claim(r, ledger.Claimed)
		e.clock.Advance(time.Duration(i+1) * time.Second) // later claims are kept later
	}
	got, err := e.l.RecentSessions(e.ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []ledger.SessionRef{{Tenant: "t1", Session: "new"}, {Tenant: "t2", Session: "middle"}}
	if !slices.Equal(got, want) {
		t.Fatalf("RecentSessions(2) = %v, want %v", got, want)
	}
}

// testListTenant: a tenant's records by creation time, from a time on,
// across its sessions and without other tenants'.
func testListTenant(t *testing.T, e *env) {
	if _, ok := e.store.(ledger.TenantStore); !ok {
		t.Skip("the store is not a ledger.TenantStore")
	}
	var marks []int64
	for i, s := range []struct{ tenant, session, key string }{{"t1", "a", "k1"}, {"t2", "a", "k2"}, {"t1", "b", "k3"}, {"t1", "a", "k4"}} {
		r := req(s.key)
		r.Tenant, r.Session = s.tenant, s.session
		c := e.claim(r, ledger.Claimed)
		marks = append(marks, c.Record.CreatedAt)
		e.clock.Advance(time.Duration(i+1) * time.Millisecond)
	}
	all, err := e.l.Tenant(e.ctx, "t1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(all); !slices.Equal(got, []string{"k1", "k3", "k4"}) {
		t.Fatalf("Tenant(t1) = %v, want k1 k3 k4 in creation order", got)
	}
	later, err := e.l.Tenant(e.ctx, "t1", marks[2], 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(later); !slices.Equal(got, []string{"k3", "k4"}) {
		t.Fatalf("Tenant(t1, since k3) = %v, want k3 k4", got)
	}
	one, err := e.l.Tenant(e.ctx, "t1", 0, 1)
	if err != nil || len(one) != 1 || one[0].Key != "k1" {
		t.Fatalf("Tenant(t1, limit 1) = %v %v", keys(one), err)
	}
}
