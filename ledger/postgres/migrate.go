package postgres

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The migrations, applied in order of their number: NNNN_name.sql. Each
// runs once, in the same transaction as its row in idem_migrations. A
// released migration is never edited; a change is a new file.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, p := range names {
		base := path.Base(p)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v != len(out)+1 {
			return nil, fmt.Errorf("ledger/postgres: migration %s is out of sequence (want number %d)", base, len(out)+1)
		}
		b, err := migrationFS.ReadFile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: strings.TrimSuffix(base, ".sql"), sql: string(b)})
	}
	return out, nil
}

// SchemaVersion is the schema version this package migrates to.
func SchemaVersion() int {
	ms, _ := migrations()
	return len(ms)
}

// migrate creates the schema if absent and applies the migrations it
// lacks, in one transaction holding an advisory lock on the schema's name:
// replicas starting together take turns, and the later ones find the work
// done. A schema newer than this package is refused (run the newer idem).
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	h := fnv.New64a()
	h.Write([]byte("idem migrate " + s.cfg.Schema))
	lockKey := int64(h.Sum64())
	schema := pgx.Identifier{s.cfg.Schema}.Sanitize()

	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// A migration (or the wait for another replica's) may outlast the
		// statement timeout; Open's ctx bounds it instead.
		if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = 0`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey); err != nil {
			return err
		}
		var enc string
		if err := tx.QueryRow(ctx, `SELECT current_setting('server_encoding')`).Scan(&enc); err != nil {
			return err
		}
		if enc != "UTF8" {
			return fmt.Errorf("the database's encoding is %s; idem needs UTF8", enc)
		}
		for _, q := range []string{
			`CREATE SCHEMA IF NOT EXISTS ` + schema,
			`SET LOCAL search_path TO ` + schema,
			`CREATE TABLE IF NOT EXISTS idem_migrations (
				version    integer PRIMARY KEY,
				name       text NOT NULL,
				applied_at timestamptz NOT NULL DEFAULT now())`,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		var have []int
		rows, err := tx.Query(ctx, `SELECT version FROM idem_migrations ORDER BY version`)
		if err != nil {
			return err
		}
		if have, err = pgx.CollectRows(rows, pgx.RowTo[int]); err != nil {
			return err
		}
		if n := len(have); n > 0 && have[n-1] > len(ms) {
			return fmt.Errorf("schema %s is at version %d, newer than this idem's %d: run the newer idem", s.cfg.Schema, have[n-1], len(ms))
		}
		for _, m := range ms {
			if slices.Contains(have, m.version) {
				continue
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO idem_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return err
			}
			s.log.Info("ledger/postgres: migrated", "schema", s.cfg.Schema, "migration", m.name)
		}
		return nil
	})
	if err != nil {
		return s.fail("migrate schema "+s.cfg.Schema, err)
	}
	return nil
}
