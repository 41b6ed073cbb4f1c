package funnel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/embed"
	"github.com/idem-dev/idem/internal/half"
	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/ledger/badger"
)

// The tests of this file show that the semantic stage never skips a
// candidate silently: on a slow encoder, with a budget that runs out, after
// a restart, in big sessions. None of them depends on the machine's speed:
// an encoder that must be too slow sleeps longer than the budget (or never
// answers), and a budget that must not run out is minutes long.

// slowEncoder answers after delay (or when ctx ends).
type slowEncoder struct {
	Embedder
	delay time.Duration
	texts atomic.Int64
}

func (e *slowEncoder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	select {
	case <-time.After(e.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	e.texts.Add(int64(len(texts)))
	return e.Embedder.Embed(ctx, texts)
}

// brokenEncoder fails every call.
type brokenEncoder struct{ Embedder }

func (brokenEncoder) Embed(context.Context, []string) ([][]float32, error) {
	return nil, errors.New("the model server is down")
}

// openBadger opens a Badger store in dir without sync writes (speed;
// durability is the ledger's own test), closed when the test ends.
func openBadger(t testing.TB, dir string) *badger.Store {
	t.Helper()
	scfg := badger.DefaultConfig(dir)
	scfg.SyncWrites = false
	store, err := badger.Open(scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(context.Background()) })
	return store
}

// openStore opens a ledger on a Badger store in dir (which outlives a
// funnel: a restart is a new funnel on the same directory).
func openStore(t testing.TB, dir string) *ledger.Ledger {
	t.Helper()
	led, err := ledger.New(openBadger(t, dir), ledger.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return led
}

func checkOn(t testing.TB, f *Funnel, r Request) Result {
	t.Helper()
	r.Tenant, r.Workflow = "acme", "wf"
	if r.Session == "" {
		r.Session = "s1"
	}
	res, err := f.Check(context.Background(), r)
	if err != nil {
		t.Fatalf("Check(%s step %s): %v", r.Tool, r.Step, err)
	}
	return res
}

func closeFunnel(t testing.TB, f *Funnel) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestBlindRecordIsComparedAfterARestart: a call that executed before its
// embedding could be computed (the encoder never answered, and the funnel
// stopped) leaves a record without embedding. After a restart, a
// rewording of it is still compared and asked about, and the record gets
// its embedding.
func TestBlindRecordIsComparedAfterARestart(t *testing.T) {
	led := openStore(t, t.TempDir())
	stuck := &slowEncoder{Embedder: encoder(t), delay: time.Hour}
	a := newFunnel(t, led, time.Now, options{budget: time.Millisecond, embedder: stuck})
	first := checkOn(t, a, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice)})
	want(t, first, Execute, StageNew)
	if _, err := led.Complete(context.Background(), "acme", first.Key, first.Token, json.RawMessage(`{"message_id":"m-1"}`)); err != nil {
		t.Fatal(err)
	}
	closeFunnel(t, a)
	got, err := led.Get(context.Background(), "acme", first.Key)
	if err != nil || len(got.Record.Embedding) != 0 {
		t.Fatalf("the first call's record should be without embedding (err %v, %d values)", err, len(got.Record.Embedding))
	}

	b := newFunnel(t, led, time.Now, options{})
	res := checkOn(t, b, Request{Step: "7", Tool: "send_email", Arguments: []byte(invoiceReworded)})
	want(t, res, Confirm, StageSemantic)
	if res.Match == nil || res.Match.Key != first.Key || res.Match.Similarity < 0.9 {
		t.Fatalf("match %+v: want the first call with similarity ≥ 0.9", res.Match)
	}
	if err := b.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err = led.Get(context.Background(), "acme", first.Key)
	if err != nil || got.Record.EmbeddingModel != embed.USEName || len(got.Record.Embedding) != embed.USEDim {
		t.Errorf("the first call's record should now hold its embedding (err %v, model %q, %d values)", err, got.Record.EmbeddingModel, len(got.Record.Embedding))
	}
}

// TestClaimedCallsAreEmbeddedInTheBackground: a call checked with nothing
// to compare is not embedded on the request path; its embedding is
// computed after the claim and written to its record, so that after a
// restart a rewording is compared without embedding it again.
func TestClaimedCallsAreEmbeddedInTheBackground(t *testing.T) {
	led := openStore(t, t.TempDir())
	counted := &slowEncoder{Embedder: encoder(t)}
	a := newFunnel(t, led, time.Now, options{embedder: counted})
	first := checkOn(t, a, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice)})
	want(t, first, Execute, StageNew)
	if _, ok := first.TimingsUS["embed"]; ok {
		t.Errorf("a call with nothing to compare was embedded on the request path (timings %v)", first.TimingsUS)
	}
	if err := a.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := counted.texts.Load(); n != 1 {
		t.Errorf("%d texts embedded, want the first call's 1 (in the background)", n)
	}
	got, err := led.Get(context.Background(), "acme", first.Key)
	if err != nil || len(got.Record.Embedding) != embed.USEDim {
		t.Fatalf("record after the background embedding: err %v, %d values", err, len(got.Record.Embedding))
	}
	closeFunnel(t, a)

	counted = &slowEncoder{Embedder: encoder(t)}
	b := newFunnel(t, led, time.Now, options{embedder: counted})
	res := checkOn(t, b, Request{Step: "7", Tool: "send_email", Arguments: []byte(invoiceReworded)})
	want(t, res, Confirm, StageSemantic)
	if n := counted.texts.Load(); n != 1 {
		t.Errorf("%d texts embedded after the restart, want 1 (the rewording; the first call's vectors come from its record)", n)
	}
}

// rewordings of one e-mail, to one recipient.
var rewordings = []string{
	`{"to":"ann@example.com","subject":"Your invoice for May","body":"Hi Ann, your invoice for May is attached. Best, Bob"}`,
	`{"to":"ann@example.com","subject":"May invoice","body":"Hi Ann, attached is your May invoice. Best regards, Bob"}`,
	`{"to":"ann@example.com","subject":"Invoice for May","body":"Hello Ann, please find your May invoice attached. Bob"}`,
	`{"to":"ann@example.com","subject":"Your May invoice","body":"Dear Ann, I attached your invoice for May. Best, Bob"}`,
	`{"to":"ann@example.com","subject":"The invoice for May","body":"Hi Ann, here is your invoice for the month of May. Bob"}`,
	`{"to":"ann@example.com","subject":"May: your invoice","body":"Hi Ann, your invoice for May is in the attachment. Cheers, Bob"}`,
	`{"to":"ann@example.com","subject":"Invoice (May)","body":"Ann, attached you will find the invoice for May. Regards, Bob"}`,
	`{"to":"ann@example.com","subject":"Your invoice, May","body":"Hi Ann, the May invoice is attached to this mail. Best, Bob"}`,
}

// TestConcurrentRewordingsOnASlowEncoder: eight rewordings of one write
// checked at once, under their own steps, on an encoder slower than the
// budget: one executes, every other is asked about, saying it could not be
// compared. None executes unseen.
func TestConcurrentRewordingsOnASlowEncoder(t *testing.T) {
	budget := 50 * time.Millisecond
	slow := &slowEncoder{Embedder: encoder(t), delay: 4 * budget}
	e := newEnv(t, options{budget: budget, embedder: slow})
	results := make([]Result, len(rewordings))
	errs := make([]error, len(rewordings))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, args := range rewordings {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = e.f.Check(context.Background(), Request{Tenant: "acme", Session: "s1", Workflow: "wf",
				Step: fmt.Sprint(i), Tool: "send_email", Arguments: []byte(args)})
		}()
	}
	close(start)
	wg.Wait()
	executes := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("check %d: %v", i, errs[i])
		}
		switch r.Decision {
		case Execute:
			executes++
		case Confirm:
			if r.NotCompared == nil || !strings.Contains(strings.Join(r.Notes, "\n"), "not compared") {
				t.Errorf("check %d: confirm without saying what was not compared (notes %v)", i, r.Notes)
			}
		default:
			t.Errorf("check %d: %s (%s), want execute or confirm", i, r.Decision, r.Reason)
		}
	}
	if executes != 1 {
		t.Errorf("%d of %d rewordings executed, want exactly 1", executes, len(rewordings))
	}
}

// TestUncomparedFallback: a candidate that could not be compared makes a
// write ask and a read execute, each saying why; a policy may choose.
func TestUncomparedFallback(t *testing.T) {
	read := DefaultPolicies()[0]
	read.Tools = []string{"search_*"}
	read.ReadOnly = nil
	cases := []struct {
		name     string
		tool     string
		policies []Policy
		emb      func(t *testing.T) Embedder
		want     Decision
		reason   string
	}{
		{"write, encoder down", "send_email", nil, func(t *testing.T) Embedder { return brokenEncoder{encoder(t)} }, Confirm, "encoder error"},
		{"read, encoder down", "search_mail", []Policy{read, DefaultPolicy()}, func(t *testing.T) Embedder { return brokenEncoder{encoder(t)} }, Execute, "encoder error"},
		{"write, budget", "send_email", nil, func(t *testing.T) Embedder { return &slowEncoder{Embedder: encoder(t), delay: time.Hour} }, Confirm, "budget"},
		{"write, policy executes", "send_email", func() []Policy {
			p := DefaultPolicy()
			p.Uncompared = FallbackExecute
			return []Policy{p}
		}(), func(t *testing.T) Embedder { return brokenEncoder{encoder(t)} }, Execute, "encoder error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := options{policies: tc.policies, embedder: tc.emb(t)}
			if tc.reason == "budget" {
				o.budget = 20 * time.Millisecond
			}
			e := newEnv(t, o)
			e.run(t, Request{Step: "1", Tool: tc.tool, Arguments: []byte(rewordings[0])}, `{"ok":true}`)
			res := e.check(t, Request{Step: "2", Tool: tc.tool, Arguments: []byte(rewordings[1])})
			if res.Decision != tc.want {
				t.Fatalf("%s at %s (%s), want %s", res.Decision, res.Stage, res.Reason, tc.want)
			}
			if res.NotCompared == nil || !strings.HasPrefix(res.NotCompared.Reason, tc.reason) ||
				len(res.NotCompared.Keys) != 1 || res.NotCompared.Keys[0] != "wf:1:"+tc.tool {
				t.Errorf("not_compared %+v: want %q naming wf:1:%s", res.NotCompared, tc.reason, tc.tool)
			}
			if res.BudgetExceeded != (tc.reason == "budget") {
				t.Errorf("budget_exceeded %v", res.BudgetExceeded)
			}
		})
	}
	t.Run("a failed candidate is no candidate", func(t *testing.T) {
		e := newEnv(t, options{embedder: brokenEncoder{encoder(t)}})
		first := e.check(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(rewordings[0])})
		if _, err := e.ledger.Fail(context.Background(), "acme", first.Key, first.Token, json.RawMessage(`{"status":503}`), ledger.ClassTransient); err != nil {
			t.Fatal(err)
		}
		want(t, e.check(t, Request{Step: "2", Tool: "send_email", Arguments: []byte(rewordings[1])}), Execute, StageNew)
	})
}

// TestEncoderQueueSaysAtOnceWhenItCannotMakeIt: once the queue has
// measured the encoder slower than the budget, a check that needs an
// embedding is told so at once rather than after the embedding.
func TestEncoderQueueSaysAtOnceWhenItCannotMakeIt(t *testing.T) {
	budget := 50 * time.Millisecond
	slow := &slowEncoder{Embedder: encoder(t), delay: 6 * budget}
	e := newEnv(t, options{budget: budget, embedder: slow})
	e.run(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(rewordings[0])}, `{"ok":true}`)
	if err := e.f.Settle(context.Background()); err != nil { // the first call's embedding: the queue measures the encoder
		t.Fatal(err)
	}
	res := e.check(t, Request{Step: "2", Tool: "send_email", Arguments: []byte(rewordings[1])})
	want(t, res, Confirm, StageSemantic)
	if res.NotCompared == nil || !strings.Contains(res.NotCompared.Reason, "could not embed it in time") {
		t.Errorf("not_compared %+v: want the queue's refusal", res.NotCompared)
	}
}

// syntheticVector is a unit vector of dim values drawn from seed.
func syntheticVector(seed uint64, dim int) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	embed.Normalize(v)
	return v
}

// fillSession claims n calls in session s1 through the ledger: the first is
// the invoice e-mail with its real embedding, the others e-mails to other
// recipients, each with a synthetic embedding when vectors is set (else
// every other one is a call of a tool without text).
func fillSession(t testing.TB, led *ledger.Ledger, n int, vectors bool) string {
	t.Helper()
	f := newFunnel(t, led, time.Now, options{})
	defer closeFunnel(t, f)
	ctx := context.Background()
	claim := func(i int, tool string, args []byte, emb []float32) string {
		call, err := f.canon.Canonicalize(tool, args)
		if err != nil {
			t.Fatal(err)
		}
		req := ledger.ClaimRequest{Tenant: "acme", Key: fmt.Sprintf("old:%d:%s", i, tool), Session: "s1",
			Workflow: "old", Step: fmt.Sprint(i), Tool: tool, Canonical: call.Canonical, Hash: call.Hash, Identity: call.IdentityDigest}
		if emb != nil {
			req.Embedding, req.EmbeddingModel = emb, embed.USEName
		}
		got, err := led.Claim(ctx, req)
		if err != nil || got.Outcome != ledger.Claimed {
			t.Fatalf("claim %d: %v %v", i, got.Outcome, err)
		}
		if _, err := led.Complete(ctx, "acme", req.Key, got.Token, json.RawMessage(`{"ok":true}`)); err != nil {
			t.Fatal(err)
		}
		return req.Key
	}
	first, err := f.canon.Canonicalize("send_email", []byte(invoice))
	if err != nil {
		t.Fatal(err)
	}
	vecs, err := encoder(t).Embed(ctx, []string{first.TextView()})
	if err != nil {
		t.Fatal(err)
	}
	key := claim(0, "send_email", []byte(invoice), vecs[0])
	var wg sync.WaitGroup
	const workers = 4
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1 + w; i < n; i += workers {
				if i%2 == 0 && !vectors {
					claim(i, "get_order", fmt.Appendf(nil, `{"order_id":"W%07d"}`, i), nil)
					continue
				}
				var emb []float32
				if vectors {
					emb = syntheticVector(uint64(i), embed.USEDim)
				}
				claim(i, "send_email", fmt.Appendf(nil, `{"to":"user%d@example.com","subject":"Note %d","body":"Hello, this is note number %d of the series."}`, i, i, i), emb)
			}
		}()
	}
	wg.Wait()
	return key
}

// TestBigSessionAfterARestart: after a restart, a rewording of the first
// call of a 50,000-call session is asked about while the session is still
// loading (saying so), and caught by similarity once it has loaded; never
// executed unseen.
func TestBigSessionAfterARestart(t *testing.T) {
	n := 50_000
	if testing.Short() {
		n = 5_000
	}
	dir := t.TempDir()
	led := openStore(t, dir)
	key := fillSession(t, led, n, false)

	// A budget far shorter than reading n records takes on any machine:
	// the check finds the session loading.
	loading := newFunnel(t, led, time.Now, options{budget: time.Millisecond})
	res := checkOn(t, loading, Request{Step: "new-1", Tool: "send_email", Arguments: []byte(invoiceReworded)})
	t.Logf("while loading: %s at %s: %s; notes %q", res.Decision, res.Stage, res.Reason, res.Notes)
	if res.Decision != Confirm {
		t.Fatalf("while loading: %s at %s (%s), want confirm", res.Decision, res.Stage, res.Reason)
	}
	if res.NotCompared == nil || !strings.Contains(res.NotCompared.Reason, "loading") {
		if res.Match == nil || res.Match.Key != key {
			t.Fatalf("while loading: confirm without the loading note or the match (%+v, notes %v)", res.NotCompared, res.Notes)
		}
	}
	closeFunnel(t, loading)

	// Restarted again, warming the most recent sessions.
	warm := newFunnel(t, led, time.Now, options{warm: 10})
	if err := warm.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := warm.sessions.get(Scope("acme", "s1"))
	s.mu.Lock()
	loaded, held := s.loaded, len(s.byKey)
	s.mu.Unlock()
	if !loaded || held != n {
		t.Fatalf("after warming: loaded %v with %d calls, want %d", loaded, held, n)
	}
	res = checkOn(t, warm, Request{Step: "new-2", Tool: "send_email", Arguments: []byte(invoiceReworded)})
	want(t, res, Confirm, StageSemantic)
	if res.Match == nil || res.Match.Key != key || res.Match.Similarity < 0.9 {
		t.Errorf("match %+v: want %s with similarity ≥ 0.9", res.Match, key)
	}
	// A call without text in the same session is decided by hash.
	want(t, checkOn(t, warm, Request{Step: "new-3", Tool: "get_order", Arguments: []byte(`{"order_id":"W0000002"}`)}), Duplicate, StageExact)
}

// TestSessionOf6000CallsKeepsItsFirst: no cap on a session's view hides
// its oldest calls: a rewording of the first of 6,000 calls, each with its
// embedding, is caught.
func TestSessionOf6000CallsKeepsItsFirst(t *testing.T) {
	led := openStore(t, t.TempDir())
	key := fillSession(t, led, 6_000, true)
	f := newFunnel(t, led, time.Now, options{})
	res := checkOn(t, f, Request{Step: "new", Tool: "send_email", Arguments: []byte(invoiceReworded)})
	want(t, res, Confirm, StageSemantic)
	if res.Match == nil || res.Match.Key != key || res.Match.Similarity < 0.9 {
		t.Errorf("match %+v: want %s with similarity ≥ 0.9", res.Match, key)
	}
}

// slowListing answers session listings after a delay: a ledger far away.
type slowListing struct {
	*ledger.Ledger
	delay time.Duration
}

func (l *slowListing) Session(ctx context.Context, tenant, session string, after uint64, limit int) ([]ledger.Record, error) {
	time.Sleep(l.delay)
	return l.Ledger.Session(ctx, tenant, session, after, limit)
}

// TestSmallSessionLoadedPastTheBudget: a session read whole by the check
// that found it unloaded is loaded, even when reading it took longer than
// the budget: it is not answered as still loading.
func TestSmallSessionLoadedPastTheBudget(t *testing.T) {
	e := newEnv(t, options{budget: 5 * time.Millisecond})
	e.f.ledger = &slowListing{Ledger: e.ledger, delay: 50 * time.Millisecond}
	for i := range 8 {
		res := e.check(t, Request{Session: fmt.Sprint("fresh-", i), Step: fmt.Sprint(i), Tool: "send_email", Arguments: []byte(invoice)})
		want(t, res, Execute, StageNew)
	}
}

// TestRecordedEmbeddingsAreHalves: the embedding written to a call's
// record is its encoder's vector rounded to half precision (which Badger
// stores in 2 bytes a value), and a rewording checked against those values
// is still caught.
func TestRecordedEmbeddingsAreHalves(t *testing.T) {
	e := newEnv(t, options{})
	first := e.run(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice)}, `{"message_id":"m-1"}`)
	if err := e.f.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := e.ledger.Get(context.Background(), "acme", first.Key)
	if err != nil || len(got.Record.Embedding) != embed.USEDim {
		t.Fatalf("record: %d embedding values, %v", len(got.Record.Embedding), err)
	}
	if !half.Exact(got.Record.Embedding) {
		t.Fatal("the recorded embedding holds values that are no halves")
	}
	raw, err := encoder(t).Embed(context.Background(), []string{"send_email\nbody: Hi Ann, your invoice for May is attached. Best, Bob\nsubject: Your invoice for May"})
	if err != nil {
		t.Fatal(err)
	}
	if half.Exact(raw[0]) {
		t.Fatal("the encoder's own vector is already halves: the test shows nothing")
	}
	res := e.check(t, Request{Step: "2", Tool: "send_email", Arguments: []byte(invoiceReworded)})
	want(t, res, Confirm, StageSemantic)
}
