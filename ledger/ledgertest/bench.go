package ledgertest

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem/ledger"
)

// The benchmark bodies every store runs, so their numbers compare.

// BenchRequest is a realistic claim: a 300-byte canonical call and a 512-d
// embedding (the built-in encoder's size).
func BenchRequest(key string) ledger.ClaimRequest {
	canon := make([]byte, 300)
	for i := range canon {
		canon[i] = 'a' + byte(i%26)
	}
	emb := make([]float32, 512)
	for i := range emb {
		emb[i] = float32(i) / 512
	}
	return ledger.ClaimRequest{Tenant: "bench", Key: key, Session: "s", Workflow: "w", Step: "1", Tool: "send_email",
		Canonical: canon, Hash: 1, Identity: 2, Embedding: emb, EmbeddingModel: "use-lite"}
}

// BenchClaimNew: one claim of a fresh key per iteration (a write).
func BenchClaimNew(b *testing.B, l *ledger.Ledger) {
	req := BenchRequest("")
	ctx := b.Context()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		req.Key = "key-" + strconv.Itoa(i)
		if c, err := l.Claim(ctx, req); err != nil || c.Outcome != ledger.Claimed {
			b.Fatalf("claim: %v %v", c.Outcome, err)
		}
	}
}

// BenchClaimNewFenced: BenchClaimNew with every claim fenced on the
// session's newest Seq (the previous claim's), as the funnel claims.
func BenchClaimNewFenced(b *testing.B, l *ledger.Ledger) {
	req := BenchRequest("")
	req.Fenced = true
	ctx := b.Context()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		req.Key = "key-" + strconv.Itoa(i)
		c, err := l.Claim(ctx, req)
		if err != nil || c.Outcome != ledger.Claimed {
			b.Fatalf("claim: %v %v", c.Outcome, err)
		}
		req.SessionSeen = c.Record.Seq
	}
}

// BenchClaimExisting: one claim of a completed key per iteration, answered
// Duplicate (a read).
func BenchClaimExisting(b *testing.B, l *ledger.Ledger) {
	ctx := b.Context()
	req := BenchRequest("done")
	c, err := l.Claim(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.Complete(ctx, "bench", "done", c.Token, json.RawMessage(`{"id":"msg-1"}`)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if c, err := l.Claim(ctx, req); err != nil || c.Outcome != ledger.Duplicate {
			b.Fatalf("claim: %v %v", c.Outcome, err)
		}
	}
}

// BenchClaimComplete: the whole life of an executed call per iteration,
// claim then complete.
func BenchClaimComplete(b *testing.B, l *ledger.Ledger) {
	req := BenchRequest("")
	result := json.RawMessage(`{"id":"msg-1","status":"sent"}`)
	ctx := b.Context()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		req.Key = "key-" + strconv.Itoa(i)
		c, err := l.Claim(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Complete(ctx, "bench", req.Key, c.Token, result); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchGetMiss: one Get of a key never claimed per iteration, what a check
// of a new call reads first. explicit: the key of an explicit
// idempotency key, whose miss also reads the old key form (see
// ledger.Ledger.Get); else a positional key, one read.
func BenchGetMiss(b *testing.B, l *ledger.Ledger, explicit bool) {
	ctx := b.Context()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		in := ledger.KeyInput{Workflow: "w", Step: strconv.Itoa(i), Tool: "send_email"}
		if explicit {
			in = ledger.KeyInput{IdempotencyKey: "order-" + strconv.Itoa(i), Tool: "send_email"}
		}
		key, err := ledger.KeyFor(in)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Get(ctx, "bench", key); !errors.Is(err, ledger.ErrNotFound) {
			b.Fatalf("get: %v", err)
		}
	}
}

// BenchClaimCompleteConcurrent: clients goroutines, each an agent with its
// own session, claim and complete new keys; an iteration is one pair, and
// pairs/s is the throughput of all of them together (with sync writes,
// what concurrent claims and completions sharing fsyncs buys).
func BenchClaimCompleteConcurrent(b *testing.B, l *ledger.Ledger, clients int) {
	result := json.RawMessage(`{"id":"msg-1","status":"sent"}`)
	ctx := b.Context()
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := range clients {
		wg.Go(func() {
			req := BenchRequest("")
			req.Session, req.Workflow = "s"+strconv.Itoa(g), "w"+strconv.Itoa(g)
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				req.Key = "key-" + strconv.FormatInt(i, 10)
				c, err := l.Claim(ctx, req)
				if err != nil || c.Outcome != ledger.Claimed {
					b.Errorf("claim: %v %v", c.Outcome, err)
					return
				}
				if _, err := l.Complete(ctx, "bench", req.Key, c.Token, result); err != nil {
					b.Errorf("complete: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}
