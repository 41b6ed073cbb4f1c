package badger

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/idem-dev/idem/ledger"
)

// benchRequest is a realistic claim: a 300-byte canonical call and a 512-d
// embedding (the built-in encoder's size).
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
// fresh key (a write, fsynced when sync=on). existing: every claim finds a
// completed key and is answered Duplicate (a read).
func BenchmarkClaim(b *testing.B) {
	for _, mode := range syncModes {
		b.Run("new/"+mode.name, func(b *testing.B) {
			l := newLedger(b, openStore(b, b.TempDir(), mode.on), nil)
			keys := benchKeys(b.N)
			req := benchRequest("")
			ctx := b.Context()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				req.Key = keys[i]
				if c, err := l.Claim(ctx, req); err != nil || c.Outcome != ledger.Claimed {
					b.Fatalf("claim: %v %v", c.Outcome, err)
				}
			}
		})
		b.Run("existing/"+mode.name, func(b *testing.B) {
			l := newLedger(b, openStore(b, b.TempDir(), mode.on), nil)
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
// complete: two commits.
func BenchmarkClaimComplete(b *testing.B) {
	for _, mode := range syncModes {
		b.Run(mode.name, func(b *testing.B) {
			l := newLedger(b, openStore(b, b.TempDir(), mode.on), nil)
			keys := benchKeys(b.N)
			req := benchRequest("")
			result := json.RawMessage(`{"id":"msg-1","status":"sent"}`)
			ctx := b.Context()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				req.Key = keys[i]
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
					req := benchRequest("")
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
				req := benchRequest("")
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
