package ledgertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/idem-dev/idem/ledger"
)

// fenced returns r fenced on seen.
func fenced(r ledger.ClaimRequest, seen uint64) ledger.ClaimRequest {
	r.Fenced, r.SessionSeen = true, seen
	return r
}

// needFence skips a test of a store that does not fence.
func needFence(t *testing.T, e *env) {
	t.Helper()
	if _, ok := e.store.(ledger.FencedStore); !ok {
		t.Skip("the store is not a ledger.FencedStore")
	}
}

// wantMoved checks that err is a refused fence reporting the counter at last.
func wantMoved(t *testing.T, op string, err error, last uint64) {
	t.Helper()
	wantErr(t, op, err, ledger.ErrSessionMoved)
	m, ok := errors.AsType[*ledger.SessionMovedError](err)
	if !ok {
		t.Fatalf("%s: error %v is not a *ledger.SessionMovedError", op, err)
	}
	if m.Last != last {
		t.Fatalf("%s: counter reported at %d, want %d", op, m.Last, last)
	}
}

func (e *env) sessionKeys(session string) []string {
	e.t.Helper()
	recs, err := e.l.Session(e.ctx, "t1", session, 0, 0)
	if err != nil {
		e.t.Fatalf("Session(%q): %v", session, err)
	}
	return keys(recs)
}

func testFencedClaimWins(t *testing.T, e *env) {
	needFence(t, e)
	// A session never used stands at 0.
	a := e.claim(fenced(req("k1"), 0), ledger.Claimed)
	if a.Record.Seq != 1 {
		t.Fatalf("first fenced claim took seq %d, want 1", a.Record.Seq)
	}
	e.claim(req("k2"), ledger.Claimed) // unfenced: seq 2
	c := e.claim(fenced(req("k3"), 2), ledger.Claimed)
	if c.Record.Seq != 3 {
		t.Fatalf("fenced claim at 2 took seq %d, want 3", c.Record.Seq)
	}
	if got := e.sessionKeys("s1"); fmt.Sprint(got) != "[k1 k2 k3]" {
		t.Fatalf("session lists %v", got)
	}
	// No session, no counter: the fence is ignored.
	r := req("k4")
	r.Session = ""
	e.claim(fenced(r, 99), ledger.Claimed)
}

func testFencedClaimStale(t *testing.T, e *env) {
	needFence(t, e)
	e.claim(req("k1"), ledger.Claimed)
	e.claim(req("k2"), ledger.Claimed)
	for _, seen := range []uint64{0, 1, 3} {
		_, err := e.l.Claim(e.ctx, fenced(req("k3"), seen))
		wantMoved(t, fmt.Sprintf("claim fenced at %d", seen), err, 2)
	}
	// An unused session stands at 0, not at what the caller believes.
	other := req("k9")
	other.Session = "s2"
	_, err := e.l.Claim(e.ctx, fenced(other, 4))
	wantMoved(t, "claim in an unused session fenced at 4", err, 0)
	// Nothing was written, and no number was taken.
	for _, k := range []string{"k3", "k9"} {
		if _, err := e.l.Get(e.ctx, "t1", k); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("Get(%q) after a refused fence: %v, want not found", k, err)
		}
	}
	if got := e.sessionKeys("s2"); len(got) != 0 {
		t.Fatalf("unused session lists %v after a refused fence", got)
	}
	if c := e.claim(req("k3"), ledger.Claimed); c.Record.Seq != 3 {
		t.Fatalf("claim after refused fences took seq %d, want 3", c.Record.Seq)
	}
}

func testFencedClaimOfHeldKey(t *testing.T, e *env) {
	needFence(t, e)
	c := e.claim(req("k1"), ledger.Claimed)
	e.claim(req("k2"), ledger.Claimed)
	// The key is held: the fence plays no part, whatever it says.
	e.claim(fenced(req("k1"), 0), ledger.InProgress)
	e.claim(fenced(req("k1"), 2), ledger.InProgress)
	e.complete("t1", "k1", c.Token, `"sent"`)
	if got := e.claim(fenced(req("k1"), 1), ledger.Duplicate); string(got.Record.Result) != `"sent"` {
		t.Fatalf("fenced claim of a completed key replays %s", got.Record.Result)
	}
	// A transient failure frees the key: claiming it again takes a new
	// number, so the fence applies.
	d := e.claim(req("k3"), ledger.Claimed)
	if _, err := e.l.Fail(e.ctx, "t1", "k3", d.Token, json.RawMessage(`{"status":503}`), ledger.ClassTransient); err != nil {
		t.Fatalf("Fail: %v", err)
	}
	_, err := e.l.Claim(e.ctx, fenced(req("k3"), 2))
	wantMoved(t, "fenced re-claim of a failed key at a stale seq", err, 3)
	if got := e.get("t1", "k3"); got.Outcome != ledger.Retryable || got.Record.Seq != 3 {
		t.Fatalf("after a refused re-claim the record is %v seq %d, want retryable seq 3", got.Outcome, got.Record.Seq)
	}
	again := e.claim(fenced(req("k3"), 3), ledger.Claimed)
	if again.Record.Seq != 4 || again.Previous == nil {
		t.Fatalf("fenced re-claim took seq %d (previous %v), want 4 and the failure", again.Record.Seq, again.Previous)
	}
}

func testConcurrentFencedClaims(t *testing.T, e *env) {
	needFence(t, e)
	const rounds, goroutines = 40, 8
	for round := range rounds {
		session := fmt.Sprintf("race%d", round)
		seen := uint64(round % 3) // 0 (no counter yet) and counters that exist
		for i := range seen {
			r := req(fmt.Sprintf("%s-pre%d", session, i))
			r.Session = session
			e.claim(r, ledger.Claimed)
		}
		var (
			mu     sync.Mutex // guards wins
			wins   []string
			wg     sync.WaitGroup
			failed = make(chan error, goroutines)
		)
		for g := range goroutines {
			wg.Go(func() {
				r := req(fmt.Sprintf("%s-g%d", session, g))
				r.Session = session
				c, err := e.l.Claim(e.ctx, fenced(r, seen))
				switch {
				case err == nil && c.Outcome == ledger.Claimed:
					mu.Lock()
					wins = append(wins, r.Key)
					mu.Unlock()
				case err == nil:
					failed <- fmt.Errorf("claim of a fresh key %q answered %v", r.Key, c.Outcome)
				default:
					if m, ok := errors.AsType[*ledger.SessionMovedError](err); !ok || m.Last != seen+1 {
						failed <- fmt.Errorf("claim %q: %v, want the session moved to %d", r.Key, err, seen+1)
					}
				}
			})
		}
		wg.Wait()
		close(failed)
		for err := range failed {
			t.Fatalf("round %d: %v", round, err)
		}
		if len(wins) != 1 {
			t.Fatalf("round %d: %d fenced claims at seq %d won (%v), want exactly 1", round, len(wins), seen, wins)
		}
		if got := e.sessionKeys(session); len(got) != int(seen)+1 || got[seen] != wins[0] {
			t.Fatalf("round %d: session lists %v, want %d records ending with %s", round, got, seen+1, wins[0])
		}
	}
}
