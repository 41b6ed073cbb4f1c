// Package pgtest gives tests a schema of their own in the throwaway
// PostgreSQL that scripts/with-postgres starts, so that tests sharing the
// database never see each other's rows.
package pgtest

import (
	"context"
	"crypto/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDSN names the test database's DSN; scripts/with-postgres sets it.
const EnvDSN = "IDEM_TEST_POSTGRES_DSN"

// DSN returns the test database's DSN, or skips the test when none is set.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		t.Skipf("%s is not set: run the test under a throwaway PostgreSQL with scripts/with-postgres", EnvDSN)
	}
	return dsn
}

// Schema returns a fresh schema name starting with prefix, dropped with
// everything in it when the test ends. The schema itself is created by
// whoever opens a store on it.
func Schema(t testing.TB, dsn, prefix string) string {
	t.Helper()
	schema := prefix + strings.ToLower(rand.Text()[:12])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return schema
}
