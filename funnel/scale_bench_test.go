package funnel

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/embed"
	"github.com/idem-dev/idem/index"
	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/pairscore"
)

// benchSession fills session s1 with n completed calls, through the
// ledger: e-mails to other recipients (each with a synthetic embedding)
// and order lookups without text, alternately, and first the invoice
// e-mail to ann@example.com with its real embedding.
func benchSession(b *testing.B, e *env, n int) {
	b.Helper()
	ctx := context.Background()
	claim := func(i int, tool string, args []byte, emb []float32) {
		call, err := e.f.canon.Canonicalize(tool, args)
		if err != nil {
			b.Fatal(err)
		}
		req := ledger.ClaimRequest{Tenant: "acme", Key: fmt.Sprintf("old:%d:%s", i, tool), Session: "s1",
			Workflow: "old", Step: fmt.Sprint(i), Tool: tool, Canonical: call.Canonical, Hash: call.Hash, Identity: call.IdentityDigest}
		if emb != nil {
			req.Embedding, req.EmbeddingModel = emb, embed.USEName
		}
		got, err := e.ledger.Claim(ctx, req)
		if err != nil || got.Outcome != ledger.Claimed {
			b.Fatalf("claim %d: %v %v", i, got.Outcome, err)
		}
		if _, err := e.ledger.Complete(ctx, "acme", req.Key, got.Token, json.RawMessage(`{"ok":true}`)); err != nil {
			b.Fatal(err)
		}
	}
	first, err := e.f.canon.Canonicalize("send_email", []byte(invoice))
	if err != nil {
		b.Fatal(err)
	}
	vecs, err := encoder(b).Embed(ctx, []string{first.TextView()})
	if err != nil {
		b.Fatal(err)
	}
	claim(0, "send_email", []byte(invoice), vecs[0])
	for i := 1; i < n; i++ {
		if i%2 == 0 {
			claim(i, "get_order", fmt.Appendf(nil, `{"order_id":"W%07d"}`, i), nil)
			continue
		}
		claim(i, "send_email", fmt.Appendf(nil, `{"to":"user%d@example.com","subject":"Note %d","body":"Hello, this is note number %d of the series."}`, i, i, i),
			syntheticVector(uint64(i), embed.USEDim))
	}
}

// BenchmarkSessionSize measures a check at session sizes 10 to 50,000
// (after the view is loaded), with and without text fields: a new call
// without text (it executes, and is claimed), a new call with text to a
// new recipient (nothing passes the identity gate: it executes without
// being embedded), and a rewording of the session's first call (embedded
// and compared; confirm, nothing claimed).
func BenchmarkSessionSize(b *testing.B) {
	for _, n := range []int{10, 1_000, 10_000, 50_000} {
		e := newEnv(b, options{})
		benchSession(b, e, n)
		run := func(name string, want Decision, req func(i int) Request) {
			// With -count above 1 the testing package runs this sub-benchmark
			// again on the same env: i carries on so that its steps stay new.
			i := 0
			b.Run(fmt.Sprintf("%s/session=%d", name, n), func(b *testing.B) {
				b.ReportAllocs()
				var lat []time.Duration
				for b.Loop() {
					i++
					r := req(i)
					r.Tenant, r.Session, r.Workflow = "acme", "s1", "wf"
					t0 := time.Now()
					res, err := e.f.Check(context.Background(), r)
					lat = append(lat, time.Since(t0))
					if err != nil {
						b.Fatal(err)
					}
					if res.Decision != want {
						b.Fatalf("%s at %s (%s), want %s", res.Decision, res.Stage, res.Reason, want)
					}
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)*50/100].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			})
		}
		// Load the view before timing.
		e.check(b, Request{Step: "warm-up", Tool: "get_order", Arguments: []byte(`{"order_id":"warm-up"}`)})
		run("no-text-new", Execute, func(i int) Request {
			return Request{Step: fmt.Sprintf("n%d-%d", n, i), Tool: "get_order", Arguments: fmt.Appendf(nil, `{"order_id":"N%d-%d"}`, n, i)}
		})
		run("text-new", Execute, func(i int) Request {
			return Request{Step: fmt.Sprintf("t%d-%d", n, i), Tool: "send_email", Arguments: fmt.Appendf(nil,
				`{"to":"new%d-%d@example.com","subject":"Your invoice for May","body":"Hi, your invoice for May is attached. Best, Bob"}`, n, i)}
		})
		run("text-reworded", Confirm, func(i int) Request {
			return Request{Step: fmt.Sprintf("r%d-%d", n, i), Tool: "send_email", Arguments: []byte(invoiceReworded)}
		})
	}
}

// BenchmarkFreshTextConcurrent measures checks whose text must be embedded
// (each body a distinct STS-B sentence, to a recipient the session has
// written to: the check embeds it and compares), at 1, 8 and 32
// concurrent clients through the encoder queue: checks/s and latency.
func BenchmarkFreshTextConcurrent(b *testing.B) {
	sentences := stsSentences(b, 8000)
	next := 0
	for _, clients := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			e := newEnv(b, options{})
			e.run(b, Request{Step: "0", Tool: "send_email", Arguments: []byte(invoice)}, `{"ok":true}`)
			if err := e.f.Settle(context.Background()); err != nil {
				b.Fatal(err)
			}
			var (
				mu    sync.Mutex // guards lat and next
				lat   []time.Duration
				taken atomic.Int64
				wg    sync.WaitGroup
				fail  atomic.Value
			)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for int(taken.Add(1)) <= b.N {
						mu.Lock()
						body := sentences[next%len(sentences)]
						next++
						step := fmt.Sprint("s", next)
						mu.Unlock()
						args, _ := json.Marshal(map[string]string{"to": "ann@example.com", "subject": "A note", "body": body})
						t0 := time.Now()
						res, err := e.f.Check(context.Background(), Request{Tenant: "acme", Session: "s1", Workflow: "wf", Step: step, Tool: "send_email", Arguments: args})
						d := time.Since(t0)
						if err != nil {
							fail.Store(err)
							return
						}
						if res.NotCompared != nil {
							fail.Store(fmt.Errorf("not compared: %s", res.NotCompared.Reason))
							return
						}
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if err, ok := fail.Load().(error); ok {
				b.Fatal(err)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "checks/s")
			b.ReportMetric(float64(lat[len(lat)*50/100].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkTenantScope measures a semantic check against a tenant-wide
// scope of 100,000 earlier reads of one tool with equal identity fields
// (one partition of the index: searched through its HNSW graph), in a
// session of its own: the rewording of one of them, embedded, searched,
// re-scored and replayed from the tenant cache.
func BenchmarkTenantScope(b *testing.B) {
	const n = 100_000
	pols := readPolicies(0.9)
	pols[0].Scope = ScopeTenant
	e := newEnv(b, options{policies: pols, scopes: true})
	ctx := context.Background()
	claim := func(i int, args []byte, emb []float32) {
		call, err := e.f.canon.Canonicalize("search_docs", args)
		if err != nil {
			b.Fatal(err)
		}
		req := ledger.ClaimRequest{Tenant: "acme", Key: fmt.Sprintf("old:%d:search_docs", i), Session: fmt.Sprint("user-", i%1000),
			Workflow: "old", Step: fmt.Sprint(i), Tool: "search_docs", Canonical: call.Canonical, Hash: call.Hash,
			Identity: call.IdentityDigest, Embedding: emb, EmbeddingModel: embed.USEName}
		got, err := e.ledger.Claim(ctx, req)
		if err != nil || got.Outcome != ledger.Claimed {
			b.Fatalf("claim %d: %v %v", i, got.Outcome, err)
		}
		if _, err := e.ledger.Complete(ctx, "acme", req.Key, got.Token, json.RawMessage(`{"hits":[]}`)); err != nil {
			b.Fatal(err)
		}
	}
	first := []byte(`{"repo":"idem","query":"How do I rotate the API keys of a tenant?"}`)
	call, _ := e.f.canon.Canonicalize("search_docs", first)
	vecs, err := encoder(b).Embed(ctx, []string{call.TextView()})
	if err != nil {
		b.Fatal(err)
	}
	claim(0, first, vecs[0])
	for i := 1; i < n; i++ {
		claim(i, fmt.Appendf(nil, `{"repo":"idem","query":"question number %d about the docs"}`, i), syntheticVector(uint64(i), embed.USEDim))
	}
	req := Request{Tenant: "acme", Session: "new-user", Workflow: "wf", Tool: "search_docs",
		Arguments: []byte(`{"repo":"idem","query":"How can I rotate a tenant's API keys?"}`)}
	// The first check loads the scope and starts its graph; wait for it.
	req.Step = "warm"
	if _, err := e.f.Check(ctx, req); err != nil {
		b.Fatal(err)
	}
	if err := e.f.scopes.(*index.Flat).WaitGraphs(ctx); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		req.Step = fmt.Sprint("s", i)
		t0 := time.Now()
		res, err := e.f.Check(ctx, req)
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		if res.Decision != Duplicate || res.Scope != "tenant" {
			b.Fatalf("%s (%s), scope %q: want a duplicate from the tenant scope", res.Decision, res.Reason, res.Scope)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*50/100].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	st := e.f.scopes.(*index.Flat).Stats()
	b.ReportMetric(float64(st.Graphs), "graphs")
}

// BenchmarkScorerCost: what the pair scorer adds to a text check, the
// rewording of a call (its text embedded ahead, so the check's own cost is
// what remains), without and with the scorer in the same run.
func BenchmarkScorerCost(b *testing.B) {
	m, err := pairscore.Default()
	if err != nil {
		b.Fatal(err)
	}
	cn, err := canon.New(canon.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	var views []string
	for _, a := range []string{invoice, invoiceReworded} {
		c, err := cn.Canonicalize("send_email", []byte(a))
		if err != nil {
			b.Fatal(err)
		}
		views = append(views, c.TextView())
	}
	for _, tc := range []struct {
		name   string
		scorer Scorer
	}{{"cosine", nil}, {"scorer", m}} {
		b.Run(tc.name, func(b *testing.B) {
			e := newEnv(b, options{embedder: newMemoEncoder(b, views...), scorer: tc.scorer})
			e.run(b, Request{Step: "1", Tool: "send_email", Arguments: []byte(invoice)}, `{"ok":true}`)
			if err := e.f.Settle(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				res := e.check(b, Request{Step: fmt.Sprint("r", i), Tool: "send_email", Arguments: []byte(invoiceReworded)})
				if res.Decision != Confirm {
					b.Fatalf("%s (%s)", res.Decision, res.Reason)
				}
			}
		})
	}
}

// BenchmarkNewCallGraded measures a new identity-only call (executes, is
// claimed) in a session of one tool whose earlier calls all have its
// shape, as the load benchmark's calls do: the check grades the newest
// maxGraded of them for restated identity values, none of which it
// restates.
func BenchmarkNewCallGraded(b *testing.B) {
	e := newEnv(b, options{})
	call := func(i int) Request {
		return Request{Step: fmt.Sprint(i), Tool: "charge_card", Arguments: fmt.Appendf(nil,
			`{"customer_id":"cus_s1_%d","amount":%d,"currency":"EUR","invoice":"inv-%d"}`, i, 1000+i%9000, i)}
	}
	i := 0
	for ; i < 2*maxGraded; i++ {
		e.run(b, call(i), `{"ok":true}`)
	}
	b.ReportAllocs()
	for b.Loop() {
		i++
		if res := e.check(b, call(i)); res.Decision != Execute {
			b.Fatalf("%s at %s (%s), want execute", res.Decision, res.Stage, res.Reason)
		}
	}
}
