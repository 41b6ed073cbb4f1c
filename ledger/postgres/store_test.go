package postgres

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/ledger/ledgertest"
)

// TestConformance runs the ledger's conformance suite on PostgreSQL, each
// subtest in a schema of its own.
func TestConformance(t *testing.T) {
	testDSN(t)
	ledgertest.Run(t, func(t *testing.T) ledger.Store { return openStore(t, newSchema(t), nil) })
}

// TestCorruptRecord: a bad row (an embedding that is not a whole number
// of float32s, written behind the store's back) reads as a
// *ledger.CorruptError naming its key, its session and workflow still
// list, and Forget removes it.
func TestCorruptRecord(t *testing.T) {
	ledgertest.Corrupt(t, func(t *testing.T) ledger.Store { return openStore(t, newSchema(t), nil) },
		func(t *testing.T, st ledger.Store, tenant, key string) {
			s := st.(*Store)
			tag, err := s.pool.Exec(t.Context(), `UPDATE idem_records SET embedding = '\x010203' WHERE tenant = $1 AND key = $2`, tenant, key)
			if err != nil || tag.RowsAffected() != 1 {
				t.Fatalf("writing a bad row: %v %v", tag, err)
			}
		})
}

// TestRace: 32 goroutines on two stores (two replicas of one schema)
// claim the same 200 keys concurrently. Exactly one claim per key wins,
// every loser is told the winner's state, and each session's numbers are
// unique.
func TestRace(t *testing.T) {
	schema := newSchema(t)
	stores := []*Store{openStore(t, schema, nil), openStore(t, schema, nil)}
	ledgertest.Race(t, []*ledger.Ledger{newLedger(t, stores[0], nil), newLedger(t, stores[1], nil)}, 32, 200)
}

// TestReplicas: three stores on one schema stand for three idem replicas.
// 300 clients spread over them race on 50 keys: exactly 50 win. Then every
// client waits on its key through its own replica while the winners
// complete through theirs; every waiter gets the result, and the time from
// a completion's commit to each waiter's wake-up is measured. The
// re-check interval is set far beyond the test, so only the database's
// notifications can wake the other replicas' waiters in time.
func TestReplicas(t *testing.T) {
	const replicas, clients, nkeys = 3, 300, 50
	schema := newSchema(t)
	var ledgers []*ledger.Ledger
	for range replicas {
		s := openStore(t, schema, func(c *Config) { c.RecheckInterval = time.Hour })
		ledgers = append(ledgers, newLedger(t, s, func(c *ledger.Config) { c.Now = s.Now }))
	}
	ctx := t.Context()
	type answer struct {
		replica, key int
		c            ledger.Claim
	}
	answers := make([]answer, clients)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			<-start
			a := answer{replica: i % replicas, key: i % nkeys}
			var err error
			a.c, err = ledgers[a.replica].Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: fmt.Sprint("k", a.key), Session: "s", Attempt: i + 1})
			if err != nil {
				t.Errorf("client %d: Claim: %v", i, err)
			}
			answers[i] = a
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	winner := make([]int, nkeys) // client index + 1
	for i, a := range answers {
		switch a.c.Outcome {
		case ledger.Claimed:
			if winner[a.key] != 0 {
				t.Fatalf("key %d: clients %d and %d both claimed it", a.key, winner[a.key]-1, i)
			}
			winner[a.key] = i + 1
		case ledger.InProgress:
		default:
			t.Fatalf("client %d: %v, want claimed or in_progress", i, a.c.Outcome)
		}
	}
	for k, w := range winner {
		if w == 0 {
			t.Fatalf("key %d: no execute", k)
		}
	}

	// Every loser waits through its own replica.
	type woken struct {
		at  time.Time
		c   ledger.Claim
		err error
	}
	wakes := make([]woken, clients)
	var waiting sync.WaitGroup
	for i, a := range answers {
		if a.c.Outcome == ledger.Claimed {
			continue
		}
		waiting.Go(func() {
			c, err := ledgers[a.replica].Wait(ctx, "t", fmt.Sprint("k", a.key))
			wakes[i] = woken{time.Now(), c, err}
		})
	}
	time.Sleep(200 * time.Millisecond) // let the waiters register
	completed := make([]time.Time, nkeys)
	for k, w := range winner {
		a := answers[w-1]
		_, err := ledgers[a.replica].Complete(ctx, "t", fmt.Sprint("k", k), a.c.Token, json.RawMessage(fmt.Sprintf(`{"k":%d}`, k)))
		mustf(t, err, "Complete k%d", k)
		completed[k] = time.Now()
	}
	waiting.Wait()
	var lat []time.Duration
	cross := 0
	for i, w := range wakes {
		a := answers[i]
		if a.c.Outcome == ledger.Claimed {
			continue
		}
		if w.err != nil || w.c.Outcome != ledger.Duplicate || string(w.c.Record.Result) != fmt.Sprintf(`{"k":%d}`, a.key) {
			t.Fatalf("client %d: Wait = %v %s, %v; want duplicate with k%d's result", i, w.c.Outcome, w.c.Record.Result, w.err, a.key)
		}
		if answers[winner[a.key]-1].replica != a.replica {
			cross++
		}
		lat = append(lat, max(0, w.at.Sub(completed[a.key])))
	}
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	t.Logf("%d waiters (%d on another replica than the completer): wake-up after completion p50 %v, p99 %v, max %v",
		len(lat), cross, p(0.5), p(0.99), lat[len(lat)-1])
	if lat[len(lat)-1] > time.Second {
		t.Fatalf("a waiter woke %v after the completion; notifications should take milliseconds", lat[len(lat)-1])
	}
}
