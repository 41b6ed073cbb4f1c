package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/ledger"
)

// TestTerminatedBackends: while clients claim and complete on two stores,
// every backend of both (pool and listener) is ended with
// pg_terminate_backend, ten times. Every operation either succeeds or
// fails with an error matching ErrUnavailable (never another error, never
// a wrong answer); once the terminations stop everything succeeds again,
// every acknowledged completion replays its result, no row is
// half-written, and a waiter on one store is woken by a completion on the
// other (the listener reconnected).
func TestTerminatedBackends(t *testing.T) {
	schema := newSchema(t)
	stores := []*Store{openStore(t, schema, nil), openStore(t, schema, nil)}
	ledgers := []*ledger.Ledger{newLedger(t, stores[0], nil), newLedger(t, stores[1], nil)}
	adm := admin(t)
	ctx := t.Context()

	var (
		mu        sync.Mutex // guards completed
		completed = map[string]string{}
		failures  atomic.Int64
		ops       atomic.Int64
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			l := ledgers[g%2]
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("g%d-%d", g, i)
				result := fmt.Sprintf(`{"g":%d,"i":%d}`, g, i)
				ops.Add(1)
				c, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: key, Session: fmt.Sprint("s", g), Workflow: "w", Embedding: []float32{1, 2}})
				if err != nil {
					if !errors.Is(err, ErrUnavailable) {
						t.Errorf("Claim %s: %v, want success or ErrUnavailable", key, err)
					}
					failures.Add(1)
					continue
				}
				if c.Outcome != ledger.Claimed {
					t.Errorf("Claim of fresh key %s: %v", key, c.Outcome)
					continue
				}
				_, err = l.Complete(ctx, "t", key, c.Token, json.RawMessage(result))
				if err != nil {
					if !errors.Is(err, ErrUnavailable) {
						t.Errorf("Complete %s: %v, want success or ErrUnavailable", key, err)
					}
					failures.Add(1)
					continue
				}
				mu.Lock()
				completed[key] = result
				mu.Unlock()
			}
		})
	}
	killed := 0
	for range 10 {
		time.Sleep(50 * time.Millisecond)
		killed += terminate(t, adm, schema)
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("%d backends terminated; %d of %d claim/complete calls failed with ErrUnavailable", killed, failures.Load(), ops.Load())
	if killed == 0 {
		t.Fatal("no backend was terminated")
	}

	// Recovered: every call succeeds, on both stores.
	for i, l := range ledgers {
		key := fmt.Sprint("after-", i)
		c, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: key, Session: "s"})
		mustf(t, err, "Claim after the terminations on store %d", i)
		_, err = l.Complete(ctx, "t", key, c.Token, json.RawMessage(`1`))
		mustf(t, err, "Complete after the terminations on store %d", i)
	}
	for key, result := range completed {
		c, err := ledgers[0].Get(ctx, "t", key)
		if err != nil || c.Outcome != ledger.Duplicate || string(c.Record.Result) != result {
			t.Fatalf("acknowledged completion %s: %v %s %v", key, c.Outcome, c.Record.Result, err)
		}
	}
	checkRows(t, adm, schema)

	// The listeners are back: a waiter on store 1 hears a completion on store 0.
	c, err := ledgers[0].Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "waited"})
	mustf(t, err, "Claim")
	deadline := time.Now().Add(10 * time.Second)
	for !stores[1].listening() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	done := make(chan error, 1)
	go func() {
		w, err := ledgers[1].Wait(ctx, "t", "waited")
		if err == nil && w.Outcome != ledger.Duplicate {
			err = fmt.Errorf("outcome %v", w.Outcome)
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	_, err = ledgers[0].Complete(ctx, "t", "waited", c.Token, json.RawMessage(`1`))
	mustf(t, err, "Complete")
	select {
	case err := <-done:
		mustf(t, err, "Wait")
	case <-time.After(time.Second): // far below the 2 s re-check
		t.Fatal("the waiter on the other store was not notified after the reconnection")
	}
}

// checkRows asserts every row of schema is whole: a PENDING row has no
// result or error, a SUCCESS row a result, a FAILED row an error and a
// class, and no session number is used twice (a unique index holds that).
func checkRows(t *testing.T, adm *pgx.Conn, schema string) {
	t.Helper()
	var bad int
	err := adm.QueryRow(context.Background(), `SELECT count(*) FROM `+schema+`.idem_records WHERE NOT (
		(status = 1 AND result IS NULL AND error IS NULL AND class = 0) OR
		(status = 2 AND result IS NOT NULL AND error IS NULL AND class = 0) OR
		(status = 3 AND result IS NULL AND error IS NOT NULL AND class > 0))
		OR (session <> '' AND seq < 1) OR token = ''`).Scan(&bad)
	mustf(t, err, "checking rows")
	if bad != 0 {
		t.Fatalf("%d half-written rows", bad)
	}
}

// TestDatabaseOutage: the store reaches the database through a proxy that
// the test cuts (every connection dropped mid-run, new ones refused) and
// restores. During the outage calls fail promptly with an error matching
// ErrUnavailable that says what happened; a waiter is not stranded: its
// Wait reports the error; after the restore calls succeed without
// reopening the store, and a waiter is notified by a change made on
// another store.
func TestDatabaseOutage(t *testing.T) {
	schema := newSchema(t)
	px := newProxy(t, testDSN(t))
	direct := openStore(t, schema, nil)
	s := openStore(t, schema, func(c *Config) {
		c.DSN = px.dsn(c.DSN)
		c.ConnectTimeout = time.Second
		c.RecheckInterval = 200 * time.Millisecond
	})
	l, ld := newLedger(t, s, nil), newLedger(t, direct, nil)
	ctx := t.Context()

	held, err := ld.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "held"})
	mustf(t, err, "Claim")
	waitErr := make(chan error, 1)
	go func() {
		_, err := l.Wait(ctx, "t", "held")
		waitErr <- err
	}()
	time.Sleep(100 * time.Millisecond)

	px.cut()
	start := time.Now()
	_, err = l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "during"})
	took := time.Since(start)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Claim during the outage: %v, want ErrUnavailable", err)
	}
	t.Logf("Claim during the outage failed after %v: %v", took.Round(time.Millisecond), err)
	if took > 5*time.Second {
		t.Errorf("the failure took %v; want about the connect timeout", took)
	}
	if !strings.Contains(err.Error(), "database unavailable") {
		t.Errorf("error %q does not say the database is unavailable", err)
	}
	select {
	case err := <-waitErr:
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Wait during the outage: %v, want ErrUnavailable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter stayed blocked through the outage without hearing of it")
	}

	px.restore()
	c, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "after"})
	if err != nil || c.Outcome != ledger.Claimed {
		t.Fatalf("Claim after the restore: %v %v", c.Outcome, err)
	}
	if _, err := l.Get(ctx, "t", "during"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the refused claim left a record: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !s.listening() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	done := make(chan error, 1)
	go func() {
		w, err := l.Wait(ctx, "t", "held")
		if err == nil && w.Outcome != ledger.Duplicate {
			err = fmt.Errorf("outcome %v", w.Outcome)
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	_, err = ld.Complete(ctx, "t", "held", held.Token, json.RawMessage(`1`))
	mustf(t, err, "Complete")
	select {
	case err := <-done:
		mustf(t, err, "Wait after the restore")
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken after the restore")
	}
}

// proxy forwards TCP connections to the database until cut.
type proxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu    sync.Mutex // guards down and conns
	down  bool
	conns map[net.Conn]struct{}
}

func newProxy(t *testing.T, dsn string) *proxy {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		t.Skipf("the outage test needs a URL DSN with a host, got one it cannot parse")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	mustf(t, err, "proxy listen")
	p := &proxy{t: t, ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go p.serve()
	return p
}

// dsn rewrites dsn to go through the proxy.
func (p *proxy) dsn(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		p.t.Fatalf("proxy dsn: %v", err)
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go func() { io.Copy(s, c); s.Close() }()
		go func() { io.Copy(c, s); c.Close() }()
	}
}

// cut drops every connection and refuses new ones.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *proxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// TestStatementTimeout: a write blocked behind another transaction's row
// lock gives up at the statement timeout with an error matching
// ErrUnavailable that names the timeout, and writes nothing.
func TestStatementTimeout(t *testing.T) {
	schema := newSchema(t)
	s := openStore(t, schema, func(c *Config) { c.StatementTimeout = 200 * time.Millisecond })
	l := newLedger(t, s, nil)
	ctx := t.Context()
	c, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "k"})
	mustf(t, err, "Claim")
	tx, err := admin(t).Begin(ctx)
	mustf(t, err, "begin")
	defer tx.Rollback(context.Background())
	_, err = tx.Exec(ctx, `SELECT 1 FROM `+schema+`.idem_records WHERE key = 'k' FOR UPDATE`)
	mustf(t, err, "lock")
	start := time.Now()
	_, err = l.Complete(ctx, "t", "k", c.Token, json.RawMessage(`1`))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "statement timeout") {
		t.Fatalf("Complete behind a lock: %v, want ErrUnavailable naming the statement timeout", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Complete took %v with a 200ms statement timeout", took)
	}
	mustf(t, tx.Rollback(ctx), "rollback")
	if got, err := l.Get(ctx, "t", "k"); err != nil || got.Outcome != ledger.InProgress {
		t.Fatalf("after the timeout: %v %v, want still in progress", got.Outcome, err)
	}
}

// TestTextWithNUL: PostgreSQL text cannot hold NUL; such an id is refused
// as invalid input, and nothing is written.
func TestTextWithNUL(t *testing.T) {
	l := newLedger(t, openStore(t, newSchema(t), nil), nil)
	ctx := t.Context()
	_, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "k", Session: "a\x00b"})
	if !errors.Is(err, ledger.ErrInvalidInput) {
		t.Fatalf("Claim with NUL in the session: %v, want ErrInvalidInput", err)
	}
	if _, err := l.Get(ctx, "t", "k"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the refused claim left a record: %v", err)
	}
}
