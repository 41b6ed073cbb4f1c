package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/ledger/postgres/pgtest"
)

// testDSN returns the test database's DSN, or skips the test.
func testDSN(t testing.TB) string { t.Helper(); return pgtest.DSN(t) }

// newSchema returns a fresh schema name, dropped when the test ends, so
// that tests never see each other's rows.
func newSchema(t testing.TB) string {
	t.Helper()
	return pgtest.Schema(t, testDSN(t), "test_")
}

// withParam adds a query parameter to a URL DSN (or a key=value one).
func withParam(dsn, k, v string) string {
	if strings.Contains(dsn, "://") {
		if strings.Contains(dsn, "?") {
			return dsn + "&" + k + "=" + v
		}
		return dsn + "?" + k + "=" + v
	}
	return dsn + " " + k + "=" + v
}

// testConfig is the store configuration of the tests: schema, and an
// application_name naming the schema so a test can find its backends.
func testConfig(t testing.TB, schema string) Config {
	t.Helper()
	cfg := DefaultConfig(withParam(testDSN(t), "application_name", "idem_"+schema))
	cfg.Schema = schema
	return cfg
}

// openStore opens a store on schema and closes it when the test ends.
func openStore(t testing.TB, schema string, mutate func(*Config)) *Store {
	t.Helper()
	cfg := testConfig(t, schema)
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func newLedger(t testing.TB, s ledger.Store, mutate func(*ledger.Config)) *ledger.Ledger {
	t.Helper()
	cfg := ledger.DefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	l, err := ledger.New(s, cfg)
	if err != nil {
		t.Fatalf("ledger.New: %v", err)
	}
	return l
}

// admin returns a plain connection to the test database for the test to
// inspect and disturb, closed when the test ends.
func admin(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, withParam(testDSN(t), "application_name", "idem_test_admin"))
	if err != nil {
		t.Fatalf("admin connection: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// terminate ends every backend of schema's stores, as an operator's
// pg_terminate_backend or a failover would, and returns how many.
func terminate(t testing.TB, conn *pgx.Conn, schema string) int {
	t.Helper()
	var n int
	err := conn.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND pid <> pg_backend_pid()`, "idem_"+schema).Scan(&n)
	if err != nil {
		t.Fatalf("pg_terminate_backend: %v", err)
	}
	return n
}

func mustf(t testing.TB, err error, format string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}
