package postgres

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/ledger/badger"
)

// The benchmarks run the same claims on Badger and on PostgreSQL in one
// run, so the numbers compare on one machine:
//
//	scripts/with-postgres go test -run '^$' -bench . -benchtime 2000x ./ledger/postgres
//
// badger/sync=on fsyncs every commit; postgres pays for durability only if
// its server does (scripts/with-postgres turns fsync off unless
// PG_DURABLE=1).

// benchRequest is a realistic claim: a 300-byte canonical call and a 512-d
// embedding (the built-in encoder's size), as in ledger/badger's benchmarks.
func benchRequest(key string) ledger.ClaimRequest {
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

type backend struct {
	name string
	open func(b *testing.B) ledger.Store
}

func backends() []backend {
	bs := []backend{
		{"badger/sync=on", func(b *testing.B) ledger.Store { return openBadger(b, true) }},
		{"badger/sync=off", func(b *testing.B) ledger.Store { return openBadger(b, false) }},
	}
	if os.Getenv(envDSN) != "" {
		bs = append(bs, backend{"postgres", func(b *testing.B) ledger.Store { return openStore(b, newSchema(b), nil) }})
	}
	return bs
}

func openBadger(b *testing.B, sync bool) ledger.Store {
	cfg := badger.DefaultConfig(b.TempDir())
	cfg.SyncWrites = sync
	s, err := badger.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// BenchmarkClaim: one claim per iteration, one client. new: every claim
// inserts a fresh key. existing: every claim finds a completed key and is
// answered Duplicate.
func BenchmarkClaim(b *testing.B) {
	for _, be := range backends() {
		b.Run("new/"+be.name, func(b *testing.B) {
			l := newLedger(b, be.open(b), nil)
			req := benchRequest("")
			ctx := b.Context()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				req.Key = "key-" + strconv.Itoa(i)
				if c, err := l.Claim(ctx, req); err != nil || c.Outcome != ledger.Claimed {
					b.Fatalf("claim: %v %v", c.Outcome, err)
				}
			}
		})
		b.Run("existing/"+be.name, func(b *testing.B) {
			l := newLedger(b, be.open(b), nil)
			ctx := b.Context()
			req := benchRequest("done")
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
		})
	}
}

// BenchmarkClaimComplete: the whole life of an executed call, claim then
// complete, one client.
func BenchmarkClaimComplete(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			l := newLedger(b, be.open(b), nil)
			req := benchRequest("")
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
		})
	}
}

// BenchmarkClaimParallel: 16 clients claim fresh keys, each in its own
// session; claims/s is the store's throughput under concurrency.
func BenchmarkClaimParallel(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			l := newLedger(b, be.open(b), nil)
			ctx := b.Context()
			var next, clients atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(8) // × GOMAXPROCS clients
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				req := benchRequest("")
				req.Session = "s" + strconv.FormatInt(clients.Add(1), 10)
				for pb.Next() {
					req.Key = "key-" + strconv.FormatInt(next.Add(1), 10)
					if c, err := l.Claim(ctx, req); err != nil || c.Outcome != ledger.Claimed {
						b.Errorf("claim: %v %v", c.Outcome, err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
		})
	}
}
