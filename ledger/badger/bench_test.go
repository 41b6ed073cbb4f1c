package badger

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/ledger/ledgertest"
)

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	return keys
}

var syncModes = []struct {
	name string
	on   bool
}{{"sync=on", true}, {"sync=off", false}}

// BenchmarkClaim: one claim per iteration. new: every claim inserts a
// fresh key (a write, fsynced when sync=on); new/fenced: the same, fenced on
// the session's newest Seq. existing: every claim finds a
// completed key and is answered Duplicate (a read).
func BenchmarkClaim(b *testing.B) {
	for _, mode := range syncModes {
		b.Run("new/"+mode.name, func(b *testing.B) {
			ledgertest.BenchClaimNew(b, newLedger(b, openStore(b, b.TempDir(), mode.on), nil))
		})
		b.Run("new/fenced/"+mode.name, func(b *testing.B) {
			ledgertest.BenchClaimNewFenced(b, newLedger(b, openStore(b, b.TempDir(), mode.on), nil))
		})
		b.Run("existing/"+mode.name, func(b *testing.B) {
			ledgertest.BenchClaimExisting(b, newLedger(b, openStore(b, b.TempDir(), mode.on), nil))
		})
	}
}

// BenchmarkGetMiss: the read of a key never claimed, positional vs
// explicit (whose miss also reads the old key form), side by side.
func BenchmarkGetMiss(b *testing.B) {
	for _, explicit := range []bool{false, true} {
		b.Run(map[bool]string{false: "positional", true: "explicit"}[explicit], func(b *testing.B) {
			ledgertest.BenchGetMiss(b, newLedger(b, openStore(b, b.TempDir(), false), nil), explicit)
		})
	}
}

// BenchmarkClaimComplete: the whole life of an executed call, claim then
// complete: two commits.
func BenchmarkClaimComplete(b *testing.B) {
	for _, mode := range syncModes {
		b.Run(mode.name, func(b *testing.B) {
			ledgertest.BenchClaimComplete(b, newLedger(b, openStore(b, b.TempDir(), mode.on), nil))
		})
	}
}

// BenchmarkClaimCompleteConcurrent: claim + complete by 1, 8 and 32
// concurrent agents, each in its own session (pairs/s of all together).
func BenchmarkClaimCompleteConcurrent(b *testing.B) {
	for _, mode := range syncModes {
		for _, clients := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%s/clients=%d", mode.name, clients), func(b *testing.B) {
				ledgertest.BenchClaimCompleteConcurrent(b, newLedger(b, openStore(b, b.TempDir(), mode.on), nil), clients)
			})
		}
	}
}

// BenchmarkClaimContended: two goroutines claim the same keys in the same
// order, so every key is raced for; one wins, one loses. An iteration is
// one claim; claims/s is the throughput of both together.
func BenchmarkClaimContended(b *testing.B) {
	for _, mode := range syncModes {
		b.Run(mode.name, func(b *testing.B) {
			l := newLedger(b, openStore(b, b.TempDir(), mode.on), nil)
			n := (b.N + 1) / 2
			keys := benchKeys(n)
			ctx := b.Context()
			var wins [2]int
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for g := range 2 {
				wg.Go(func() {
					req := ledgertest.BenchRequest("")
					for i := range n {
						req.Key = keys[i]
						c, err := l.Claim(ctx, req)
						if err != nil {
							b.Errorf("claim: %v", err)
							return
						}
						if c.Outcome == ledger.Claimed {
							wins[g]++
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if wins[0]+wins[1] != n {
				b.Fatalf("%d winners for %d keys", wins[0]+wins[1], n)
			}
			b.ReportMetric(float64(2*n)/b.Elapsed().Seconds(), "claims/s")
		})
	}
}

// BenchmarkComplete: completing a claim by result size; results past
// Config.ValueThreshold (64 KiB) go to the value log.
func BenchmarkComplete(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		for _, mode := range syncModes {
			b.Run(fmt.Sprintf("size=%dKiB/%s", size>>10, mode.name), func(b *testing.B) {
				l := newLedger(b, openStore(b, b.TempDir(), mode.on), nil)
				ctx := b.Context()
				keys := benchKeys(b.N)
				req := ledgertest.BenchRequest("")
				tokens := make([]string, b.N)
				for i := range b.N {
					req.Key = keys[i]
					c, err := l.Claim(ctx, req)
					if err != nil {
						b.Fatal(err)
					}
					tokens[i] = c.Token
				}
				result := json.RawMessage(`"` + strings.Repeat("r", size-2) + `"`)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if _, err := l.Complete(ctx, "bench", keys[i], tokens[i], result); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSyncRound: one sync round's own work (fsyncs not made) beside
// 300 or 5,000 tables (a store of about 100,000 or 1.7 million calls).
func BenchmarkSyncRound(b *testing.B) {
	for _, n := range []int{300, 5000} {
		b.Run(fmt.Sprintf("tables=%d", n), func(b *testing.B) {
			s := openStore(b, b.TempDir(), false)
			g := syncRoundWithTables(b, s, n)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.round(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGetHit: the read a key hit makes, of a completed call with
// text (its 512-value embedding in the record) and of one without.
func BenchmarkGetHit(b *testing.B) {
	for _, dim := range []int{0, 512} {
		b.Run(fmt.Sprintf("embedding=%d", dim), func(b *testing.B) {
			s := openStore(b, b.TempDir(), false)
			l := newLedger(b, s, nil)
			emb := make([]float32, dim)
			for i := range emb {
				emb[i] = float32(i) / 512
			}
			ctx := b.Context()
			c, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "wf:1:send_email", Session: "s", Workflow: "wf", Step: "1", Tool: "send_email",
				Canonical: []byte(`{"body":"Hi Ann, your invoice for March is attached.","to":"ann@example.com"}`), Embedding: emb, EmbeddingModel: "m"})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.Complete(ctx, "t", "wf:1:send_email", c.Record.Token, json.RawMessage(`{"id":"m-1"}`)); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Get(ctx, "t", "wf:1:send_email"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkListSessionUpToDate: listing a session of 100 calls past its
// newest (what every check's refresh of an up-to-date view asks).
func BenchmarkListSessionUpToDate(b *testing.B) {
	s := openStore(b, b.TempDir(), false)
	l := newLedger(b, s, nil)
	for i := range 100 {
		if _, err := l.Claim(b.Context(), ledger.ClaimRequest{Tenant: "t", Key: fmt.Sprint("k", i), Session: "s"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if recs, err := l.Session(b.Context(), "t", "s", 100, 0); err != nil || len(recs) != 0 {
			b.Fatalf("%d records, %v", len(recs), err)
		}
	}
}
