package funnel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/embed"
	"github.com/idem-dev/idem/index"
	"github.com/idem-dev/idem/judge"
	"github.com/idem-dev/idem/ledger"
)

// encoder is the built-in encoder, loaded once per test binary.
func encoder(t testing.TB) *embed.USE {
	t.Helper()
	u, err := embed.SharedUSE()
	if err != nil {
		t.Fatalf("loading the built-in encoder: %v", err)
	}
	return u
}

// memoEncoder is the built-in encoder with some texts embedded ahead:
// those come back at once.
type memoEncoder struct {
	*embed.USE
	vecs map[string][]float32
}

func newMemoEncoder(t testing.TB, texts ...string) *memoEncoder {
	t.Helper()
	u := encoder(t)
	v, err := u.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	m := &memoEncoder{USE: u, vecs: map[string][]float32{}}
	for i, text := range texts {
		m.vecs[text] = v[i]
	}
	return m
}

func (m *memoEncoder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, text := range texts {
		v, ok := m.vecs[text]
		if !ok {
			return m.USE.Embed(ctx, texts)
		}
		out[i] = v
	}
	return out, nil
}

// clock is a settable clock for leases.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type env struct {
	f      *Funnel
	ledger *ledger.Ledger
	clock  *clock
}

type options struct {
	policies []Policy
	judge    Judge
	budget   time.Duration
	embedder Embedder
	warm     int
	scorer   Scorer
	// scopes gives the funnel an index of wide scopes over the ledger.
	scopes bool
	// maxPerScope, when set, is the index's MaxPerScope.
	maxPerScope int
	// maxViewBytes, when set, is the funnel's MaxViewBytes.
	maxViewBytes int64
}

// newEnv builds a funnel on a real Badger ledger in a temp dir and the real
// built-in encoder.
func newEnv(t testing.TB, o options) *env {
	t.Helper()
	store := openBadger(t, t.TempDir())
	clk := &clock{t: time.Now()}
	lcfg := ledger.DefaultConfig()
	lcfg.Now = clk.now
	led, err := ledger.New(store, lcfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{f: newFunnel(t, led, clk.now, o), ledger: led, clock: clk}
}

// newFunnel builds a funnel on led with the real built-in encoder (unless
// o says otherwise) and an index of its own.
func newFunnel(t testing.TB, led Ledger, now func() time.Time, o options) *Funnel {
	t.Helper()
	cn, err := canon.New(canon.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	emb := o.embedder
	if emb == nil {
		emb = encoder(t)
	}
	cfg := DefaultConfig()
	// A budget no machine runs out of, however slow or busy: a test of a
	// decision must not depend on the machine's speed. The budget's own
	// paths are tested with an encoder that never answers in time.
	cfg.Budget = 10 * time.Minute
	// Tests swap the funnel's ledger after New; warming is tested on its own.
	cfg.WarmSessions = o.warm
	cfg.Now = now
	if o.policies != nil {
		cfg.Policies = o.policies
	}
	if o.maxViewBytes > 0 {
		cfg.MaxViewBytes = o.maxViewBytes
	}
	if o.budget > 0 {
		cfg.Budget = o.budget
		cfg.JudgeReserve = min(cfg.JudgeReserve, o.budget/10)
	}
	deps := Deps{Canon: cn, Ledger: led, Embedder: emb, Scorer: o.scorer}
	if o.scopes {
		icfg := index.DefaultConfig()
		icfg.Dim, icfg.MaxPerScope, icfg.MaxVectors = emb.Dim(), 200_000, 1<<20
		if o.maxPerScope > 0 {
			icfg.MaxPerScope = o.maxPerScope
		}
		idx, err := index.New(icfg, ScopeLoader(led.(ScopeLedger), cn, emb.Name(), emb.Dim()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { idx.Close(context.Background()) })
		deps.Scopes = idx
	}
	if o.judge != nil {
		deps.Judge = o.judge
	}
	f, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(context.Background()) })
	return f
}

func (e *env) check(t testing.TB, r Request) Result {
	t.Helper()
	if r.Tenant == "" {
		r.Tenant = "acme"
	}
	if r.Session == "" {
		r.Session = "s1"
	}
	if r.Workflow == "" && r.Key == "" {
		r.Workflow = "wf"
	}
	res, err := e.f.Check(context.Background(), r)
	if err != nil {
		t.Fatalf("Check(%s step %s): %v", r.Tool, r.Step, err)
	}
	return res
}

// run checks r, expects execute, and completes it with result.
func (e *env) run(t testing.TB, r Request, result string) Result {
	t.Helper()
	res := e.check(t, r)
	if res.Decision != Execute {
		t.Fatalf("first call: %s at %s (%s), want execute", res.Decision, res.Stage, res.Reason)
	}
	tenant := r.Tenant
	if tenant == "" {
		tenant = "acme"
	}
	if _, err := e.ledger.Complete(context.Background(), tenant, res.Key, res.Token, json.RawMessage(result)); err != nil {
		t.Fatal(err)
	}
	return res
}

func want(t *testing.T, res Result, d Decision, s Stage) {
	t.Helper()
	if res.Decision != d || res.Stage != s {
		t.Fatalf("got %s at %s (%s; notes %v), want %s at %s", res.Decision, res.Stage, res.Reason, res.Notes, d, s)
	}
}

const invoice = `{"to":"ann@example.com","subject":"Your invoice for May","body":"Hi Ann, your invoice for May is attached. Best, Bob"}`
const invoiceReworded = `{"to":"ann@example.com","subject":"May invoice","body":"Hi Ann, attached is your May invoice. Best regards, Bob"}`

func TestTransientRetryWithRewordedArgumentsGetsRecordedResult(t *testing.T) {
	e := newEnv(t, options{})
	e.run(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice)}, `{"message_id":"m-1"}`)
	res := e.check(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoiceReworded),
		Attempt: Attempt{Kind: Transient, Number: 2}})
	want(t, res, Duplicate, StageKey)
	if string(res.Match.Result) != `{"message_id":"m-1"}` {
		t.Errorf("replayed %s, want the recorded result", res.Match.Result)
	}
	if len(res.Notes) == 0 || !strings.Contains(res.Notes[0], "arguments differ") {
		t.Errorf("notes %v should say the arguments differ from the record", res.Notes)
	}
}

func TestSamplingRetryExecutes(t *testing.T) {
	e := newEnv(t, options{})
	first := e.run(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice)}, `{"message_id":"m-1"}`)
	res := e.check(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice),
		Attempt: Attempt{Kind: Sampling, Number: 2}})
	want(t, res, Execute, StageNew)
	if res.Key == first.Key || !strings.HasPrefix(res.Key, first.Key+"#") {
		t.Errorf("sampling key %q should derive from %q", res.Key, first.Key)
	}
	// A transient retry of that sampling attempt is answered from its record.
	again := e.check(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice),
		Attempt: Attempt{Kind: Sampling, Number: 2}})
	want(t, again, InProgress, StageKey)
}

func TestSameIntentUnderNewStepIsCaught(t *testing.T) {
	t.Run("exact", func(t *testing.T) {
		e := newEnv(t, options{})
		e.run(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice)}, `{"message_id":"m-1"}`)
		res := e.check(t, Request{Step: "7", Tool: "send_email", Arguments: []byte(
			`{"body":"Hi Ann, your invoice for May is attached. Best, Bob","subject":"Your invoice for May","to":"ann@example.com"}`)})
		want(t, res, Duplicate, StageExact)
		if string(res.Match.Result) != `{"message_id":"m-1"}` {
			t.Errorf("replayed %s", res.Match.Result)
		}
	})
	t.Run("semantic asks to confirm a write by default", func(t *testing.T) {
		e := newEnv(t, options{})
		e.run(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice)}, `{"message_id":"m-1"}`)
		res := e.check(t, Request{Step: "7", Tool: "send_email", Arguments: []byte(invoiceReworded)})
		want(t, res, Confirm, StageSemantic)
		if res.Match == nil || res.Match.Similarity < 0.9 {
			t.Errorf("match %+v: want the earlier call with similarity ≥ 0.9", res.Match)
		}
	})
	t.Run("semantic replays under a replay policy", func(t *testing.T) {
		p := DefaultPolicy()
		p.OnDuplicate, p.SemanticReplay = ActionReplay, 0.9
		e := newEnv(t, options{policies: []Policy{p}})
		e.run(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice)}, `{"message_id":"m-1"}`)
		res := e.check(t, Request{Step: "7", Tool: "send_email", Arguments: []byte(invoiceReworded)})
		want(t, res, Duplicate, StageSemantic)
		if string(res.Match.Result) != `{"message_id":"m-1"}` {
			t.Errorf("replayed %s", res.Match.Result)
		}
	})
	t.Run("a call without text is caught by equal identity fields", func(t *testing.T) {
		cfg := canon.DefaultConfig()
		cfg.Tools = map[string]canon.ToolConfig{"refund": {Normalize: canon.Normalize{FoldCase: true}}}
		e := newEnv(t, options{})
		cn, _ := canon.New(cfg)
		e.f.canon = cn
		e.run(t, Request{Step: "1", Tool: "refund", Arguments: []byte(`{"order_id":"W123","amount":12.5}`)}, `{"ok":true}`)
		res := e.check(t, Request{Step: "2", Tool: "refund", Arguments: []byte(`{"order_id":"w123","amount":12.50}`)})
		want(t, res, Confirm, StageSemantic)
	})
	t.Run("other sessions and tenants are not searched", func(t *testing.T) {
		e := newEnv(t, options{})
		e.run(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice)}, `{"message_id":"m-1"}`)
		want(t, e.check(t, Request{Session: "s2", Step: "7", Tool: "send_email", Arguments: []byte(invoice)}), Execute, StageNew)
		want(t, e.check(t, Request{Tenant: "globex", Step: "7", Tool: "send_email", Arguments: []byte(invoice)}), Execute, StageNew)
	})
}

func TestIdentityGateLetsDifferentTargetsExecute(t *testing.T) {
	cases := []struct {
		name, tool, first, second string
	}{
		{"recipient", "send_email", invoice, strings.Replace(invoice, "ann@example.com", "bob@example.com", 1)},
		{"amount", "transfer", `{"to_account":"DE89370400440532013000","amount":100,"memo":"Rent for the flat in May, as agreed"}`,
			`{"to_account":"DE89370400440532013000","amount":1000,"memo":"Rent for the flat in May, as agreed"}`},
		{"date", "book_table", `{"restaurant":"Chez Paul","date":"2024-05-01","note":"Table by the window for our anniversary dinner please"}`,
			`{"restaurant":"Chez Paul","date":"2024-05-02","note":"Table by the window for our anniversary dinner please"}`},
		{"path", "write_file", `{"path":"main.go","description":"Write the new version of the handler with the retry fix"}`,
			`{"path":"util.go","description":"Write the new version of the handler with the retry fix"}`},
		{"command", "run_shell", `{"cmd":"ls -la /tmp","reason":"look at what the build left in the temp directory"}`,
			`{"cmd":"rm -rf /tmp","reason":"look at what the build left in the temp directory"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			p.OnDuplicate, p.SemanticReplay = ActionReplay, 0.9
			e := newEnv(t, options{policies: []Policy{p}})
			e.run(t, Request{Step: "1", Tool: tc.tool, Arguments: []byte(tc.first)}, `{"ok":true}`)
			res := e.check(t, Request{Step: "2", Tool: tc.tool, Arguments: []byte(tc.second)})
			want(t, res, Execute, StageNew)
			// Without the gate the identical text makes it a duplicate:
			// the gate is what lets it through.
			p.IdentityGate = false
			e2 := newEnv(t, options{policies: []Policy{p}})
			e2.run(t, Request{Step: "1", Tool: tc.tool, Arguments: []byte(tc.first)}, `{"ok":true}`)
			want(t, e2.check(t, Request{Step: "2", Tool: tc.tool, Arguments: []byte(tc.second)}), Duplicate, StageSemantic)
		})
	}
}

func TestConcurrentIdenticalChecksExecuteOnce(t *testing.T) {
	e := newEnv(t, options{})
	const n = 32
	var wg sync.WaitGroup
	results := make([]Result, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = e.f.Check(context.Background(), Request{
				Tenant: "acme", Session: "s1", Workflow: "wf", Step: "1", Tool: "send_email", Arguments: []byte(invoice),
			})
		}()
	}
	close(start)
	wg.Wait()
	count := map[Decision]int{}
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("check %d: %v", i, errs[i])
		}
		count[r.Decision]++
	}
	if count[Execute] != 1 || count[InProgress] != n-1 {
		t.Errorf("decisions %v: want 1 execute and %d in_progress", count, n-1)
	}
}

func TestWaitForInFlightTwin(t *testing.T) {
	e := newEnv(t, options{})
	first := e.check(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice)})
	go func() {
		time.Sleep(20 * time.Millisecond)
		e.ledger.Complete(context.Background(), "acme", first.Key, first.Token, json.RawMessage(`{"message_id":"m-9"}`))
	}()
	res := e.check(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice), Wait: 10 * time.Second})
	want(t, res, Duplicate, StageKey)
	if string(res.Match.Result) != `{"message_id":"m-9"}` {
		t.Errorf("waiter got %s, want the winner's result", res.Match.Result)
	}
}

func TestDeadExecutorIsUncertainAfterItsLease(t *testing.T) {
	e := newEnv(t, options{})
	first := e.check(t, Request{Step: "1", Tool: "charge", Arguments: []byte(`{"card":"tok_123","amount":50}`)})
	want(t, first, Execute, StageNew)
	// The executor dies: no complete. Within the lease a retry waits its turn.
	want(t, e.check(t, Request{Step: "1", Tool: "charge", Arguments: []byte(`{"card":"tok_123","amount":50}`)}), InProgress, StageKey)
	e.clock.advance(ledger.DefaultConfig().Lease + time.Second)
	res := e.check(t, Request{Step: "1", Tool: "charge", Arguments: []byte(`{"card":"tok_123","amount":50}`)})
	want(t, res, Uncertain, StageKey)
	// Under a new step id the same charge is uncertain too (exact stage).
	want(t, e.check(t, Request{Step: "2", Tool: "charge", Arguments: []byte(`{"card":"tok_123","amount":50}`)}), Uncertain, StageExact)
	// The caller takes over; the dead executor's token is now stale.
	took := e.check(t, Request{Step: "1", Tool: "charge", Arguments: []byte(`{"card":"tok_123","amount":50}`), Takeover: true})
	want(t, took, Execute, StageKey)
	if _, err := e.ledger.Complete(context.Background(), "acme", first.Key, first.Token, json.RawMessage(`{}`)); !errors.Is(err, ledger.ErrStaleToken) {
		t.Errorf("the dead executor's late complete: %v, want ErrStaleToken", err)
	}
}

func TestFailedCallsRunAgain(t *testing.T) {
	e := newEnv(t, options{})
	args := []byte(`{"card":"tok_123","amount":50}`)
	first := e.check(t, Request{Step: "1", Tool: "charge", Arguments: args})
	if _, err := e.ledger.Fail(context.Background(), "acme", first.Key, first.Token, json.RawMessage(`{"status":503}`), ledger.ClassTransient); err != nil {
		t.Fatal(err)
	}
	want(t, e.check(t, Request{Step: "1", Tool: "charge", Arguments: args, Attempt: Attempt{Kind: Transient, Number: 2}}), Execute, StageNew)
	second := e.check(t, Request{Step: "5", Tool: "charge", Arguments: []byte(`{"card":"tok_999","amount":50}`)})
	if _, err := e.ledger.Fail(context.Background(), "acme", second.Key, second.Token, json.RawMessage(`{"status":402}`), ledger.ClassPermanent); err != nil {
		t.Fatal(err)
	}
	res := e.check(t, Request{Step: "5", Tool: "charge", Arguments: []byte(`{"card":"tok_999","amount":50}`)})
	want(t, res, Duplicate, StageKey)
	if string(res.Match.Error) != `{"status":402}` {
		t.Errorf("replayed error %s", res.Match.Error)
	}
}

func TestNegatedInstructionIsNotReplayed(t *testing.T) {
	p := DefaultPolicy()
	p.OnDuplicate = ActionReplay
	e := newEnv(t, options{policies: []Policy{p}})
	e.run(t, Request{Step: "1", Tool: "update_order", Arguments: []byte(`{"order_id":"W42","instruction":"cancel the order"}`)}, `{"ok":true}`)
	res := e.check(t, Request{Step: "2", Tool: "update_order", Arguments: []byte(`{"order_id":"W42","instruction":"do not cancel the order"}`)})
	if res.Decision == Duplicate {
		t.Fatalf("a negated instruction was replayed as a duplicate (similarity %v)", res.Match.Similarity)
	}
	want(t, res, Execute, StageNew)
}

// judgeServer speaks OpenAI's chat-completions protocol and answers with
// the given verdict after delay.
func judgeServer(t *testing.T, dup bool, delay time.Duration, calls *atomic.Int32) *judge.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		content, _ := json.Marshal(map[string]any{"duplicate": dup, "confidence": 0.9, "reason": "same request for the same report"})
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, content)
	}))
	t.Cleanup(srv.Close)
	cfg := judge.DefaultConfig()
	cfg.Enabled, cfg.BaseURL, cfg.Model = true, srv.URL+"/v1", "m"
	j, err := judge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// A reworded request whose similarity falls in the default ambiguous band
// [0.85, 0.9) with the built-in encoder.
const (
	report1 = `{"to":"cfo@example.com","body":"Please send me the quarterly report for Q3 by Friday."}`
	report2 = `{"to":"cfo@example.com","body":"Could you send me the Q3 quarterly report by Friday?"}`
)

func TestAmbiguousBandGoesToTheJudge(t *testing.T) {
	t.Run("judge says duplicate", func(t *testing.T) {
		var calls atomic.Int32
		e := newEnv(t, options{judge: judgeServer(t, true, 0, &calls)})
		e.run(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(report1)}, `{"id":1}`)
		res := e.check(t, Request{Step: "2", Tool: "send_email", Arguments: []byte(report2)})
		want(t, res, Confirm, StageJudge)
		if res.Judge == nil || !res.Judge.Duplicate || calls.Load() != 1 {
			t.Errorf("judge verdict %+v after %d calls", res.Judge, calls.Load())
		}
		if s := res.Match.Similarity; s < 0.85 || s >= 0.9 {
			t.Errorf("similarity %v is not in the ambiguous band; pick another pair", s)
		}
	})
	t.Run("judge says distinct", func(t *testing.T) {
		var calls atomic.Int32
		e := newEnv(t, options{judge: judgeServer(t, false, 0, &calls)})
		e.run(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(report1)}, `{"id":1}`)
		res := e.check(t, Request{Step: "2", Tool: "send_email", Arguments: []byte(report2)})
		want(t, res, Execute, StageNew)
		if res.Judge == nil || res.Judge.Duplicate {
			t.Errorf("judge verdict %+v", res.Judge)
		}
	})
	t.Run("a slow judge leads to the fallback within the budget", func(t *testing.T) {
		var calls atomic.Int32
		p := DefaultPolicy()
		p.Fallback = FallbackConfirm
		// The texts are embedded ahead, so the budget is spent waiting for
		// a judge that answers long after it, whatever the machine.
		memo := newMemoEncoder(t, "send_email\nbody: Please send me the quarterly report for Q3 by Friday.",
			"send_email\nbody: Could you send me the Q3 quarterly report by Friday?")
		e := newEnv(t, options{judge: judgeServer(t, true, 3*time.Second, &calls), policies: []Policy{p}, budget: time.Second, embedder: memo})
		e.run(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(report1)}, `{"id":1}`)
		res := e.check(t, Request{Step: "2", Tool: "send_email", Arguments: []byte(report2)})
		want(t, res, Confirm, StageSemantic)
		if !res.BudgetExceeded || res.Judge != nil || res.NotCompared != nil || calls.Load() != 1 {
			t.Errorf("budget_exceeded %v, judge %+v, not compared %+v after %d judge calls: want the judge asked, then the fallback",
				res.BudgetExceeded, res.Judge, res.NotCompared, calls.Load())
		}
		if res.TimingsUS["judge"] > 5_000_000 {
			t.Errorf("the check waited %d µs for the judge", res.TimingsUS["judge"])
		}
	})
	t.Run("no judge: fallback execute reports the near match", func(t *testing.T) {
		e := newEnv(t, options{})
		e.run(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(report1)}, `{"id":1}`)
		res := e.check(t, Request{Step: "2", Tool: "send_email", Arguments: []byte(report2)})
		want(t, res, Execute, StageNew)
		if res.Match == nil {
			t.Error("the near match should be reported with the execute")
		}
	})
}

func TestLongTextIsComparedWindowByWindow(t *testing.T) {
	p := DefaultPolicy()
	p.OnDuplicate, p.SemanticReplay = ActionReplay, 0.9
	e := newEnv(t, options{policies: []Policy{p}})
	intro := strings.Repeat("The quarterly figures show steady growth in every region we serve. ", 16)
	tailA := "Approve the new office lease in Berlin, sign the contract with the landlord, and transfer the deposit to the escrow account before the end of the month so the team can move in by spring. "
	tailB := "Cancel every open purchase order with our hardware suppliers, freeze all hiring in the sales department, and tell the auditors that the annual report will be published two weeks late. "
	first := `{"to":"board@example.com","body":"` + intro + tailA + `"}`
	second := `{"to":"board@example.com","body":"` + intro + tailB + `"}`
	// The encoder alone cannot tell them apart: it reads 128 tokens.
	u := encoder(t)
	v, err := u.Embed(context.Background(), []string{"send_email\nbody: " + intro + tailA, "send_email\nbody: " + intro + tailB})
	if err != nil {
		t.Fatal(err)
	}
	if cos := embed.Cosine(v[0], v[1]); cos < 0.99 {
		t.Fatalf("whole-text cosine %v: the texts should differ only past the encoder's window", cos)
	}
	e.run(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(first)}, `{"id":1}`)
	res := e.check(t, Request{Step: "2", Tool: "send_email", Arguments: []byte(second)})
	if res.Decision != Execute {
		t.Fatalf("calls differing after the encoder's 128 tokens were flagged: %s at %s (%s)", res.Decision, res.Stage, res.Reason)
	}
	if len(res.Notes) == 0 || !strings.Contains(strings.Join(res.Notes, ";"), "windows") {
		t.Errorf("notes %v should say the text was compared in windows", res.Notes)
	}
	// The same long text reworded only at its start is still a duplicate.
	third := `{"to":"board@example.com","body":"` + strings.Replace(intro, "The quarterly", "Our quarterly", 1) + tailA + `"}`
	want(t, e.check(t, Request{Step: "3", Tool: "send_email", Arguments: []byte(third)}), Duplicate, StageSemantic)
}

func TestBadRequests(t *testing.T) {
	e := newEnv(t, options{})
	cases := []struct {
		name string
		req  Request
		err  error
	}{
		{"no session", Request{Tenant: "a", Workflow: "w", Step: "1", Tool: "t", Arguments: []byte(`{}`)}, ErrInvalidRequest},
		{"no tool", Request{Tenant: "a", Session: "s", Workflow: "w", Step: "1", Arguments: []byte(`{}`)}, ErrInvalidRequest},
		{"no arguments", Request{Tenant: "a", Session: "s", Workflow: "w", Step: "1", Tool: "t"}, ErrInvalidRequest},
		{"bad attempt", Request{Tenant: "a", Session: "s", Workflow: "w", Step: "1", Tool: "t", Arguments: []byte(`{}`), Attempt: Attempt{Kind: "again"}}, ErrInvalidRequest},
		{"no key or position", Request{Tenant: "a", Session: "s", Tool: "t", Arguments: []byte(`{}`)}, ledger.ErrInvalidInput},
		{"malformed arguments", Request{Tenant: "a", Session: "s", Workflow: "w", Step: "1", Tool: "t", Arguments: []byte(`{"a":`)}, canon.ErrSyntax},
		{"sampling without number", Request{Tenant: "a", Session: "s", Workflow: "w", Step: "1", Tool: "t", Arguments: []byte(`{}`), Attempt: Attempt{Kind: Sampling}}, ledger.ErrInvalidInput},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.f.Check(context.Background(), tc.req); !errors.Is(err, tc.err) {
				t.Errorf("err = %v, want %v", err, tc.err)
			}
		})
	}
}

func TestStrictPolicyRefusesKeyReuse(t *testing.T) {
	p := DefaultPolicy()
	p.Strict = true
	e := newEnv(t, options{policies: []Policy{p}})
	e.run(t, Request{Key: "order-77", Tool: "charge", Arguments: []byte(`{"amount":50}`)}, `{"ok":true}`)
	_, err := e.f.Check(context.Background(), Request{Tenant: "acme", Session: "s1", Key: "order-77", Tool: "charge", Arguments: []byte(`{"amount":60}`)})
	if !errors.Is(err, ErrKeyReuse) {
		t.Errorf("err = %v, want ErrKeyReuse", err)
	}
}

func TestPolicyMatching(t *testing.T) {
	yes, no := true, false
	cfg := DefaultConfig()
	cfg.Policies = []Policy{
		{Name: "payments", Tools: []string{"charge", "refund_*"}, DuplicateThreshold: 0.95, AmbiguousThreshold: 0.9, OnDuplicate: ActionConfirm, Fallback: FallbackConfirm},
		{Name: "reads", ReadOnly: &yes, DuplicateThreshold: 0.9, AmbiguousThreshold: 0.85, OnDuplicate: ActionReplay, Fallback: FallbackExecute},
		DefaultPolicy(),
	}
	cfg.Tools = map[string]ToolInfo{"get_order": {ReadOnly: &yes}, "delete_repo": {ReadOnly: &no}}
	cn, _ := canon.New(canon.DefaultConfig())
	f, err := New(cfg, Deps{Canon: cn, Ledger: &ledger.Ledger{}})
	if err != nil {
		t.Fatal(err)
	}
	for tool, wantName := range map[string]string{"charge": "payments", "refund_card": "payments", "get_order": "reads", "delete_repo": "default", "unknown": "default"} {
		if got := f.Policy(tool).Name; got != wantName {
			t.Errorf("%s: policy %s, want %s", tool, got, wantName)
		}
	}
	bad := DefaultConfig()
	bad.Policies = []Policy{{Name: "x", DuplicateThreshold: 0.8, AmbiguousThreshold: 0.9, OnDuplicate: "drop", Fallback: FallbackExecute}}
	if _, err := New(bad, Deps{Canon: cn, Ledger: &ledger.Ledger{}}); err == nil || !strings.Contains(err.Error(), "ambiguous_threshold") || !strings.Contains(err.Error(), "on_duplicate") {
		t.Errorf("invalid policy accepted or not named: %v", err)
	}
}

func TestRestatedIdentityValuesAreNamed(t *testing.T) {
	cfg := canon.DefaultConfig()
	cfg.Typed.Year = "ignore"
	e := newEnv(t, options{})
	cn, err := canon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.f.canon = cn
	e.run(t, Request{Step: "1", Tool: "book_table", Arguments: []byte(`{"restaurant":"Sino","date":"2019-03-01","time":"19:30","party_size":2}`)}, `{"ok":true}`)
	res := e.check(t, Request{Step: "2", Tool: "book_table", Arguments: []byte(`{"restaurant":"Sino","date":"March 1st","time":"evening 7:30","party_size":"two"}`)})
	want(t, res, Confirm, StageSemantic)
	notes := strings.Join(res.Notes, "\n")
	for _, w := range []string{`"evening 7:30" = "19:30"`, `"March 1st" = "2019-03-01"`} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes %q do not say %s", notes, w)
		}
	}
	// An hour later is another booking.
	want(t, e.check(t, Request{Step: "3", Tool: "book_table", Arguments: []byte(`{"restaurant":"Sino","date":"March 1st","time":"evening 8:30","party_size":2}`)}), Execute, StageNew)
}

// TestRelativeDatesAgainstTheCallersDay: "next Monday" said on Friday
// 2019-03-01 restates 2019-03-04; said a week later it is another day. A
// call without a date of its own is read in the configured timezone.
func TestRelativeDatesAgainstTheCallersDay(t *testing.T) {
	cfg := canon.DefaultConfig()
	cfg.Typed.Year = "ignore"
	cfg.Typed.Timezone = "America/Los_Angeles"
	e := newEnv(t, options{})
	cn, err := canon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.f.canon = cn
	friday := canon.Date{Year: 2019, Month: time.March, Day: 1}
	e.run(t, Request{Step: "1", Tool: "book_table", Today: friday, Arguments: []byte(`{"restaurant":"Sino","date":"2019-03-04","time":"19:30"}`)}, `{"ok":true}`)

	res := e.check(t, Request{Step: "2", Tool: "book_table", Today: friday, Arguments: []byte(`{"restaurant":"Sino","date":"next Monday","time":"evening 7:30"}`)})
	want(t, res, Confirm, StageSemantic)
	if notes := strings.Join(res.Notes, "\n"); !strings.Contains(notes, `date "next Monday" = "2019-03-04"`) {
		t.Errorf("notes %q do not name the restated date", notes)
	}
	if res.ReferenceDate != "2019-03-01" {
		t.Errorf("reference date %q, want 2019-03-01", res.ReferenceDate)
	}
	// A week later, "next Monday" is March 11th.
	want(t, e.check(t, Request{Step: "3", Tool: "book_table", Today: friday.AddDays(7), Arguments: []byte(`{"restaurant":"Sino","date":"next Monday","time":"19:30"}`)}), Execute, StageNew)

	// No date sent: the clock says 05:00 UTC on March 2nd, which is 21:00
	// on March 1st in Los Angeles, so "the day after tomorrow" is March
	// 3rd there (March 4th, a duplicate, if read in UTC).
	e.f.now = func() time.Time { return time.Date(2019, 3, 2, 5, 0, 0, 0, time.UTC) }
	res = e.check(t, Request{Step: "4", Tool: "book_table", Arguments: []byte(`{"restaurant":"Sino","date":"the day after tomorrow","time":"19:30"}`)})
	want(t, res, Execute, StageNew)
	if res.ReferenceDate != "2019-03-01" {
		t.Errorf("reference date %q, want 2019-03-01 (Los Angeles)", res.ReferenceDate)
	}
}

func TestForgottenWhileWaitingExecutes(t *testing.T) {
	e := newEnv(t, options{})
	first := e.check(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice)})
	go func() {
		time.Sleep(20 * time.Millisecond)
		e.ledger.Forget(context.Background(), "acme", first.Key, true)
	}()
	res := e.check(t, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice), Wait: 10 * time.Second})
	want(t, res, Execute, StageNew)
	if res.Token == first.Token {
		t.Error("the new claim reused the forgotten claim's token")
	}
}

// interposer claims another call through the same ledger just before the
// funnel's own claim: another replica's claim committing between this
// replica's look at the session and its claim.
type interposer struct {
	*ledger.Ledger
	once  sync.Once
	other ledger.ClaimRequest
}

func (l *interposer) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	l.once.Do(func() {
		if _, err := l.Ledger.Claim(ctx, l.other); err != nil {
			panic(err)
		}
	})
	return l.Ledger.Claim(ctx, req)
}

func TestClaimOfAnotherReplicaIsNotHidden(t *testing.T) {
	e := newEnv(t, options{})
	charge := []byte(`{"card":"tok_1","amount":50}`)
	call, err := e.f.canon.Canonicalize("charge", charge)
	if err != nil {
		t.Fatal(err)
	}
	ip := &interposer{Ledger: e.ledger, other: ledger.ClaimRequest{
		Tenant: "acme", Key: "wf:other:charge", Session: "s1", Workflow: "wf", Step: "other", Tool: "charge",
		Canonical: call.Canonical, Hash: call.Hash, Identity: call.IdentityDigest,
	}}
	e.f.ledger = ip
	// This replica claims a refund; the other replica's charge commits
	// just before, with the lower Seq.
	want(t, e.check(t, Request{Step: "1", Tool: "refund", Arguments: []byte(`{"order_id":"O1"}`)}), Execute, StageNew)
	// The same charge, asked on this replica, is the other's in progress.
	want(t, e.check(t, Request{Step: "2", Tool: "charge", Arguments: charge}), InProgress, StageExact)
}

// TestTwinsUnderNewStepsWaitingOnAFailure: identical calls under their
// own step ids race; the one that executes fails. Every check returns
// (none is left waiting on another under the session's lock), and after
// the failure the effect may run again, once per claim that saw it fail.
func TestTwinsUnderNewStepsWaitingOnAFailure(t *testing.T) {
	e := newEnv(t, options{})
	const n = 8
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	results := make(chan Result, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			res, err := e.f.Check(ctx, Request{Tenant: "acme", Session: "s1", Workflow: "wf", Step: fmt.Sprint(i),
				Tool: "charge", Arguments: []byte(`{"card":"tok_9","amount":70}`), Wait: 2 * time.Second})
			if err != nil {
				errs <- err
				return
			}
			results <- res
		}()
	}
	executes := 0
	for range n {
		select {
		case err := <-errs:
			t.Fatalf("check: %v", err)
		case res := <-results:
			if res.Decision == Execute {
				executes++
				// The executor fails, transiently: the effect did not happen.
				if _, err := e.ledger.Fail(context.Background(), "acme", res.Key, res.Token, json.RawMessage(`{"status":503}`), ledger.ClassTransient); err != nil {
					t.Fatal(err)
				}
			} else if res.Decision != InProgress {
				t.Errorf("decision %s (%s): want execute or in_progress while the twin is unfinished", res.Decision, res.Reason)
			}
		case <-ctx.Done():
			t.Fatal("a check never returned")
		}
	}
	if executes == 0 {
		t.Error("no check executed")
	}
}
