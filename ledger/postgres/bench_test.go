package postgres

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/ledger/badger"
	"github.com/idem-dev/idem/ledger/ledgertest"
	"github.com/idem-dev/idem/ledger/postgres/pgtest"
)

// The benchmarks run the same claims on Badger and on PostgreSQL in one
// run, so the numbers compare on one machine:
//
//	scripts/with-postgres go test -run '^$' -bench . -benchtime 2000x ./ledger/postgres
//
// badger/sync=on makes every write durable before it returns (concurrent
// writes share fsyncs); postgres pays for durability only if its server
// does (scripts/with-postgres turns fsync off unless PG_DURABLE=1).

type backend struct {
	name string
	open func(b *testing.B) ledger.Store
}

func backends() []backend {
	bs := []backend{
		{"badger/sync=on", func(b *testing.B) ledger.Store { return openBadger(b, true) }},
		{"badger/sync=off", func(b *testing.B) ledger.Store { return openBadger(b, false) }},
	}
	if os.Getenv(pgtest.EnvDSN) != "" {
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
// inserts a fresh key; new/fenced: the same, fenced on the session's
// newest Seq. existing: every claim finds a completed key and is
// answered Duplicate.
func BenchmarkClaim(b *testing.B) {
	for _, be := range backends() {
		b.Run("new/"+be.name, func(b *testing.B) { ledgertest.BenchClaimNew(b, newLedger(b, be.open(b), nil)) })
		b.Run("new/fenced/"+be.name, func(b *testing.B) { ledgertest.BenchClaimNewFenced(b, newLedger(b, be.open(b), nil)) })
		b.Run("existing/"+be.name, func(b *testing.B) { ledgertest.BenchClaimExisting(b, newLedger(b, be.open(b), nil)) })
	}
}

// BenchmarkGetMiss: the read of a key never claimed, positional vs
// explicit (whose miss also reads the old key form), side by side.
func BenchmarkGetMiss(b *testing.B) {
	for _, be := range backends() {
		b.Run("positional/"+be.name, func(b *testing.B) { ledgertest.BenchGetMiss(b, newLedger(b, be.open(b), nil), false) })
		b.Run("explicit/"+be.name, func(b *testing.B) { ledgertest.BenchGetMiss(b, newLedger(b, be.open(b), nil), true) })
	}
}

// BenchmarkClaimComplete: the whole life of an executed call, claim then
// complete, one client.
func BenchmarkClaimComplete(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) { ledgertest.BenchClaimComplete(b, newLedger(b, be.open(b), nil)) })
	}
}

// BenchmarkClaimCompleteConcurrent: claim + complete by 1, 8 and 32
// agents at once, each in its own session; pairs/s of all together.
func BenchmarkClaimCompleteConcurrent(b *testing.B) {
	for _, be := range backends() {
		for _, clients := range []int{1, 8, 32} {
			b.Run(be.name+"/clients="+strconv.Itoa(clients), func(b *testing.B) {
				ledgertest.BenchClaimCompleteConcurrent(b, newLedger(b, be.open(b), nil), clients)
			})
		}
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
				req := ledgertest.BenchRequest("")
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
