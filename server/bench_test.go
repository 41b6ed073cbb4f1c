package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/client"
)

// letters spells n in letters ("b", "c", …, "ba"): a new text every time
// without a number in it (numbers that differ hold a pair below the
// duplicate threshold, and this case wants the semantic stage to decide).
func letters(n int64) string {
	s := ""
	for {
		s = string(rune('a'+n%26)) + s
		n /= 26
		if n == 0 {
			return "ref " + s
		}
	}
}

// BenchmarkCheckHTTP measures checks over loopback HTTP against the real
// server (Badger without sync writes, the built-in encoder), from
// GOMAXPROCS and GOMAXPROCS×4 concurrent clients sharing the machine with the server.
// It reports checks/s and the p50/p99 latency a client sees:
//
//   - key_hit: the call's own key holds a result (the key stage decides);
//   - exact_hit: a new step repeating a completed call byte for byte (the
//     exact stage decides);
//   - semantic: a new step rewording a completed call (embedding, search,
//     identity gate; decided confirm, or execute where the rewording falls
//     below the duplicate threshold). Every text is new, so the encoder
//     runs on every check.
//
// With IDEM_TEST_POSTGRES_DSN set (scripts/with-postgres) the same cases
// run a second time with the ledger in PostgreSQL, in the same run:
//
// go test -run XXX -bench CheckHTTP -benchtime 2000x ./server
// scripts/with-postgres go test -run XXX -bench CheckHTTP -benchtime 2000x ./server
func BenchmarkCheckHTTP(b *testing.B) {
	b.Run("store=badger", func(b *testing.B) { benchCheckHTTP(b, options{}) })
	if dsn := os.Getenv("IDEM_TEST_POSTGRES_DSN"); dsn != "" {
		b.Run("store=postgres", func(b *testing.B) { benchCheckHTTP(b, options{postgresDSN: dsn}) })
	}
}

func benchCheckHTTP(b *testing.B, o options) {
	e := start(b, o)
	c := plainClient(b, e.url) // no per-exchange document validation in the timed loop
	ctx := context.Background()
	seed := func(session, step, body string) {
		r, err := c.Check(ctx, client.CheckRequest{SessionID: session, WorkflowID: "wf", StepID: step, Tool: "send_email", Arguments: emailArgs("ann@example.com", body)})
		if err != nil || r.Decision != client.Execute {
			b.Fatalf("seed: %+v %v", r, err)
		}
		if _, err := c.Complete(ctx, r.Key, r.Token, json.RawMessage(`{"id":"m-1"}`)); err != nil {
			b.Fatal(err)
		}
	}
	body := "Hello Ann, here is your invoice for March. Let me know if anything is unclear."
	seed("s-bench", "0", body)
	var step atomic.Int64
	cases := []struct {
		name     string
		decision string
		req      func() client.CheckRequest
	}{
		{"key_hit", client.Duplicate, func() client.CheckRequest {
			return client.CheckRequest{SessionID: "s-bench", WorkflowID: "wf", StepID: "0", Tool: "send_email", Arguments: emailArgs("ann@example.com", body)}
		}},
		{"exact_hit", client.Duplicate, func() client.CheckRequest {
			return client.CheckRequest{SessionID: "s-bench", WorkflowID: "wf", StepID: fmt.Sprint("x", step.Add(1)), Tool: "send_email", Arguments: emailArgs("ann@example.com", body)}
		}},
		{"semantic", client.Confirm, func() client.CheckRequest {
			n := step.Add(1)
			return client.CheckRequest{SessionID: "s-bench", WorkflowID: "wf", StepID: fmt.Sprint("s", n), Tool: "send_email",
				Arguments: emailArgs("ann@example.com", fmt.Sprintf("Hi Ann, here is your March invoice, %s. Let me know if anything is unclear.", letters(n)))}
		}},
	}
	for _, tc := range cases {
		for _, par := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/clients=%d", tc.name, par*runtime.GOMAXPROCS(0)), func(b *testing.B) {
				var mu sync.Mutex
				lat := make([]time.Duration, 0, b.N)
				b.SetParallelism(par)
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					local := make([]time.Duration, 0, 64)
					for pb.Next() {
						t0 := time.Now()
						r, err := c.Check(ctx, tc.req())
						local = append(local, time.Since(t0))
						if err != nil {
							b.Error(err)
							return
						}
						if r.Decision != tc.decision && !(tc.name == "semantic" && r.Decision == client.Execute) {
							b.Errorf("decision %s (%s), want %s", r.Decision, r.Reason, tc.decision)
							return
						}
					}
					mu.Lock()
					lat = append(lat, local...)
					mu.Unlock()
				})
				elapsed := time.Since(start)
				b.StopTimer()
				slices.Sort(lat)
				if len(lat) == 0 {
					return
				}
				b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "checks/s")
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			})
		}
	}
}

func plainClient(b *testing.B, url string) *client.Client {
	cfg := client.DefaultConfig(url)
	c, err := client.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkNewCallHTTP measures what a new call costs over loopback HTTP:
// a check of an identity-only call never seen (it executes) and its
// completion, from GOMAXPROCS×4 clients, each in its own sessions of 100 calls, against
// the real server with Badger's sync writes on and off. It reports pairs/s.
//
// go test ./server -run XXX -bench NewCallHTTP -benchtime 2000x
func BenchmarkNewCallHTTP(b *testing.B) {
	for _, sync := range []bool{true, false} {
		b.Run(fmt.Sprintf("sync=%v", sync), func(b *testing.B) {
			e := start(b, options{syncWrites: sync})
			c := plainClient(b, e.url)
			ctx := context.Background()
			var agents atomic.Int64
			b.SetParallelism(4)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				agent, session := agents.Add(1), ""
				for step := 0; pb.Next(); step++ {
					if step%100 == 0 { // an agent's run of 100 calls, as bench/load's
						session = fmt.Sprintf("agent-%d-%d", agent, step)
					}
					args := json.RawMessage(fmt.Sprintf(`{"card_id":"card-%s-%d","order_id":"ord-%d","amount_cents":%d}`, session, step, step, 100+step))
					r, err := c.Check(ctx, client.CheckRequest{SessionID: session, WorkflowID: session, StepID: fmt.Sprint(step), Tool: "charge_card", Arguments: args})
					if err != nil || r.Decision != client.Execute {
						b.Errorf("check: %+v %v", r, err)
						return
					}
					if _, err := c.Complete(ctx, r.Key, r.Token, json.RawMessage(`{"charge":"ch-1"}`)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pairs/s")
		})
	}
}
