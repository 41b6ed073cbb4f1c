package ledgertest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/idem-dev/idem/ledger"
)

// Race has goroutines claim nkeys keys concurrently, goroutine g through
// ledgers[g%len(ledgers)] (several ledgers over one store stand for
// replicas), and checks that every key has exactly one winner and that
// every loser was told the winner's claim, in progress. Keys fall into 8
// sessions; it then checks that each session lists its records once, in
// increasing Seq.
func Race(t *testing.T, ledgers []*ledger.Ledger, goroutines, nkeys int) {
	t.Helper()
	ctx := t.Context()
	winners := make([]int32, nkeys) // goroutine id+1 of each key's winner
	var mu sync.Mutex               // guards winners
	type loss struct {
		key, attempt int
		outcome      ledger.Outcome
	}
	losses := make([][]loss, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			l := ledgers[g%len(ledgers)]
			for i := range nkeys {
				k := (i + g*7) % nkeys // overlapping but not lock-step orders
				c, err := l.Claim(ctx, ledger.ClaimRequest{
					Tenant: "t", Key: fmt.Sprintf("key-%04d", k), Session: fmt.Sprint("s", k%8), Attempt: g + 1,
				})
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				if c.Outcome == ledger.Claimed {
					mu.Lock()
					if winners[k] != 0 {
						t.Errorf("key %d won by %d and %d", k, winners[k], g+1)
					}
					winners[k] = int32(g + 1)
					mu.Unlock()
					continue
				}
				losses[g] = append(losses[g], loss{k, c.Record.Attempt, c.Outcome})
			}
		})
	}
	wg.Wait()
	nloss := 0
	for _, ls := range losses {
		for _, x := range ls {
			nloss++
			if x.outcome != ledger.InProgress || int32(x.attempt) != winners[x.key] {
				t.Fatalf("key %d: loser told %v by attempt %d, winner was %d", x.key, x.outcome, x.attempt, winners[x.key])
			}
		}
	}
	for k, w := range winners {
		if w == 0 {
			t.Fatalf("key %d has no winner", k)
		}
	}
	if nloss != goroutines*nkeys-nkeys {
		t.Fatalf("%d losses, want %d", nloss, goroutines*nkeys-nkeys)
	}
	total := 0
	for s := range 8 {
		recs, err := ledgers[0].Session(ctx, "t", fmt.Sprint("s", s), 0, 0)
		if err != nil {
			t.Fatalf("session s%d: %v", s, err)
		}
		for i := 1; i < len(recs); i++ {
			if recs[i].Seq <= recs[i-1].Seq {
				t.Fatalf("session s%d: seq %d after %d", s, recs[i].Seq, recs[i-1].Seq)
			}
		}
		total += len(recs)
	}
	if total != nkeys {
		t.Fatalf("sessions list %d records, want %d", total, nkeys)
	}
}
