package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/ledger"
)

// TestSweep: the sweeper deletes records past RetainUntil by the
// database's clock (and nothing before), in batches, and a session's
// counter only once none of its records is left, so numbering never
// restarts under a live record.
func TestSweep(t *testing.T) {
	schema := newSchema(t)
	s := openStore(t, schema, func(c *Config) { c.SweepBatch = 3 })
	ctx := t.Context()
	// The short records are kept an hour: nothing this machine's speed
	// does can make the first sweep find them expired. They are then
	// moved past their retention in the database itself.
	short := newLedger(t, s, func(c *ledger.Config) {
		c.Now, c.Retention, c.Lease = s.Now, time.Hour, time.Hour
	})
	long := newLedger(t, s, func(c *ledger.Config) { c.Now = s.Now })
	for i := range 10 {
		key := "short-" + string(rune('a'+i))
		c, err := short.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: key, Session: "gone", Workflow: "w"})
		mustf(t, err, "Claim")
		_, err = short.Complete(ctx, "t", key, c.Token, json.RawMessage(`1`))
		mustf(t, err, "Complete")
	}
	kept, err := long.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "kept", Session: "live"})
	mustf(t, err, "Claim")
	_, err = short.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "short-live", Session: "live"})
	mustf(t, err, "Claim")

	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("Sweep before retention: %d, %v; want nothing deleted", n, err)
	}
	// Two hours back: past lease and retention by the database's clock.
	db := admin(t)
	for _, q := range []string{
		`UPDATE ` + schema + `.idem_records SET retain_until = retain_until - 7200000 WHERE tenant = 't' AND key LIKE 'short-%'`,
		`UPDATE ` + schema + `.idem_sessions SET retain_until = retain_until - 7200000 WHERE tenant = 't' AND session = 'gone'`,
	} {
		_, err := db.Exec(ctx, q)
		mustf(t, err, "moving the short records' retention back")
	}
	listener := admin(t)
	_, err = listener.Exec(ctx, `LISTEN "idem:`+schema+`"`)
	mustf(t, err, "LISTEN")
	n, err := s.Sweep(ctx)
	if err != nil || n != 11 {
		t.Fatalf("Sweep: %d deleted, %v; want the 11 short records", n, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if n, err := listener.WaitForNotification(wctx); err == nil {
		t.Errorf("the sweep notified waiters (%q); it should be quiet", n.Payload)
	}
	if _, err := s.Get(ctx, "t", "short-a"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("swept record: %v", err)
	}
	if _, err := s.Get(ctx, "t", "kept"); err != nil {
		t.Fatalf("record within retention was swept: %v", err)
	}
	counters := map[string]bool{}
	rows, err := admin(t).Query(ctx, `SELECT session FROM `+schema+`.idem_sessions`)
	mustf(t, err, "counters")
	for rows.Next() {
		var sess string
		mustf(t, rows.Scan(&sess), "scan")
		counters[sess] = true
	}
	if counters["gone"] || !counters["live"] {
		t.Fatalf("session counters after the sweep: %v; want live kept (its record is), gone deleted", counters)
	}
	again, err := long.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "next", Session: "live"})
	mustf(t, err, "Claim")
	if again.Record.Seq <= kept.Record.Seq+1 {
		t.Fatalf("numbering in session live restarted: %d after %d and a swept %d", again.Record.Seq, kept.Record.Seq, kept.Record.Seq+1)
	}
}

// TestSweeperRuns: the store's own sweeper removes an expired record
// without being asked.
func TestSweeperRuns(t *testing.T) {
	s := openStore(t, newSchema(t), func(c *Config) { c.SweepInterval = 50 * time.Millisecond })
	l := newLedger(t, s, func(c *ledger.Config) { c.Now, c.Retention, c.Lease = s.Now, 50*time.Millisecond, 50*time.Millisecond })
	ctx := t.Context()
	_, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "k", Session: "s"})
	mustf(t, err, "Claim")
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := s.Get(ctx, "t", "k")
		if errors.Is(err, ledger.ErrNotFound) {
			return
		}
		mustf(t, err, "Get")
		if time.Now().After(deadline) {
			t.Fatal("the record is still stored 5 s after its retention")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNowIsTheDatabaseClock: Now agrees with the database's clock to
// within a few milliseconds.
func TestNowIsTheDatabaseClock(t *testing.T) {
	s := openStore(t, newSchema(t), nil)
	adm := admin(t)
	for range 5 {
		var us int64
		before := s.Now()
		mustf(t, adm.QueryRow(t.Context(), `SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`).Scan(&us), "clock")
		after := s.Now()
		db := time.UnixMicro(us)
		if db.Before(before.Add(-5*time.Millisecond)) || db.After(after.Add(5*time.Millisecond)) {
			t.Fatalf("database clock %v outside [%v, %v] of Now", db, before, after)
		}
	}
}

// TestConcurrentMigration: replicas starting together on an empty schema
// all open it; the migrations ran once.
func TestConcurrentMigration(t *testing.T) {
	schema := newSchema(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { openStore(t, schema, nil) })
	}
	wg.Wait()
	var n, max int
	mustf(t, admin(t).QueryRow(t.Context(), `SELECT count(*), max(version) FROM `+schema+`.idem_migrations`).Scan(&n, &max), "migrations")
	if n != SchemaVersion() || max != SchemaVersion() {
		t.Fatalf("%d migration rows up to version %d, want %d once each", n, max, SchemaVersion())
	}
}

// TestMigrationAddsConfirmed: a schema an idem before migration 0003 left
// (at version 2, without the confirmed column) is migrated when a store
// opens it; its rows read with no confirmation, and new claims store theirs.
func TestMigrationAddsConfirmed(t *testing.T) {
	schema := newSchema(t)
	ctx := t.Context()
	old := openStore(t, schema, nil)
	l := newLedger(t, old, nil)
	c, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "w:1:send_email", Session: "s", Tool: "send_email"})
	mustf(t, err, "claim")
	_, err = l.Complete(ctx, "t", "w:1:send_email", c.Token, json.RawMessage(`{"id":"m-1"}`))
	mustf(t, err, "complete")
	mustf(t, old.Close(ctx), "close")
	adm := admin(t)
	for _, q := range []string{
		`ALTER TABLE ` + schema + `.idem_records DROP COLUMN confirmed`,
		`DELETE FROM ` + schema + `.idem_migrations WHERE version >= 3`,
	} {
		_, err := adm.Exec(ctx, q)
		mustf(t, err, "back to version 2: %s", q)
	}

	s := openStore(t, schema, nil)
	var version int
	mustf(t, adm.QueryRow(ctx, `SELECT max(version) FROM `+schema+`.idem_migrations`).Scan(&version), "migrations")
	if version != SchemaVersion() || version < 3 {
		t.Fatalf("schema at version %d after Open, want %d", version, SchemaVersion())
	}
	l = newLedger(t, s, nil)
	got, err := l.Get(ctx, "t", "w:1:send_email")
	if err != nil || got.Outcome != ledger.Duplicate || string(got.Record.Result) != `{"id":"m-1"}` || got.Record.Confirmed != "" {
		t.Fatalf("a row of version 2 after the migration: %v %+v, %v", got.Outcome, got.Record, err)
	}
	c, err = l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "w:2:send_email", Session: "s", Tool: "send_email", Confirmed: "w:1:send_email"})
	if err != nil || c.Outcome != ledger.Claimed || c.Record.Seq != got.Record.Seq+1 {
		t.Fatalf("claim after the migration: %v seq %d, %v", c.Outcome, c.Record.Seq, err)
	}
	if got, err := l.Get(ctx, "t", "w:2:send_email"); err != nil || got.Record.Confirmed != "w:1:send_email" {
		t.Fatalf("a claim after the migration stored confirmed %q, %v", got.Record.Confirmed, err)
	}
}

// TestNewerSchemaIsRefused: a schema migrated by a newer idem is not
// touched by an older one.
func TestNewerSchemaIsRefused(t *testing.T) {
	schema := newSchema(t)
	openStore(t, schema, nil)
	_, err := admin(t).Exec(t.Context(), `INSERT INTO `+schema+`.idem_migrations (version, name) VALUES (999, 'future')`)
	mustf(t, err, "insert")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := Open(ctx, testConfig(t, schema))
	if err == nil {
		s.Close(ctx)
		t.Fatal("Open of a newer schema succeeded")
	}
	if !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema: %v, want an error saying it is newer", err)
	}
}

// TestOpenUnreachable: Open fails promptly with ErrUnavailable when
// nothing listens, and the error does not reveal the password.
func TestOpenUnreachable(t *testing.T) {
	cfg := DefaultConfig("postgres://idem@127.0.0.1:1/idem?sslmode=disable")
	cfg.Password = "s3cret-pw"
	cfg.ConnectTimeout = time.Second
	start := time.Now()
	_, err := Open(t.Context(), cfg)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open: %v, want ErrUnavailable", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("Open took %v to fail", time.Since(start))
	}
	if strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("error reveals the password: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		field  string
	}{
		{"no DSN", func(c *Config) { c.DSN = "" }, "DSN"},
		{"bad DSN", func(c *Config) { c.DSN = "postgres://idem:pw@[::1" }, "DSN"},
		{"upper-case schema", func(c *Config) { c.Schema = "Idem" }, "Schema"},
		{"schema with a quote", func(c *Config) { c.Schema = `a"b` }, "Schema"},
		{"long schema", func(c *Config) { c.Schema = strings.Repeat("a", 51) }, "Schema"},
		{"no pool", func(c *Config) { c.PoolSize = 0 }, "PoolSize"},
		{"no statement timeout", func(c *Config) { c.StatementTimeout = 0 }, "StatementTimeout"},
		{"no connect timeout", func(c *Config) { c.ConnectTimeout = 0 }, "ConnectTimeout"},
		{"no sweep interval", func(c *Config) { c.SweepInterval = 0 }, "SweepInterval"},
		{"no sweep batch", func(c *Config) { c.SweepBatch = 0 }, "SweepBatch"},
		{"no re-check", func(c *Config) { c.RecheckInterval = 0 }, "RecheckInterval"},
		{"no clock sync", func(c *Config) { c.ClockSyncInterval = 0 }, "ClockSyncInterval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig("postgres://idem@localhost/idem")
			tc.mutate(&cfg)
			_, err := Open(t.Context(), cfg)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Open: %v, want an error naming %s", err, tc.field)
			}
			if strings.Contains(err.Error(), "pw@") {
				t.Fatalf("error reveals the DSN's password: %v", err)
			}
		})
	}
	if err := DefaultConfig("postgres://idem@localhost/idem").Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
}
