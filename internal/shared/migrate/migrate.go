// Package migrate applies EventForge's ordered SQL migrations exactly once per
// database and records what it applied.
//
// Imports (floor: shared library): sql only.
package migrate

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// lockKey is the advisory lock that serializes concurrent migrators of one
// database ("eventforge" in ASCII).
const lockKey int64 = 0x6576656e74666f72

// Migration is one file of the schema.
type Migration struct {
	Version string // the file name without .sql, e.g. 0001_schema
	SQL     string
}

// Load reads every *.sql file of dir in fsys, in name order.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	sort.Strings(names)
	out := make([]Migration, 0, len(names))
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", n, err)
		}
		out = append(out, Migration{Version: strings.TrimSuffix(path.Base(n), ".sql"), SQL: string(b)})
	}
	return out, nil
}

// Apply runs every migration not yet recorded in schema_migrations, each in
// its own transaction together with its record, while holding a session
// advisory lock so concurrent runs wait instead of racing. It returns the
// versions it applied; none on a database that is up to date.
func Apply(ctx context.Context, conn *pgx.Conn, migrations []Migration) ([]string, error) {
	var applied []string
	err := locked(ctx, conn, func() error {
		if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    text PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		done, err := appliedVersions(ctx, conn)
		if err != nil {
			return err
		}
		for _, m := range migrations {
			if done[m.Version] {
				continue
			}
			if err := applyOne(ctx, conn, m); err != nil {
				return err
			}
			applied = append(applied, m.Version)
		}
		return nil
	})
	return applied, err
}

// locked runs fn holding the session advisory lock of migrators. Session
// advisory locks stack, so fn may call Apply.
func locked(ctx context.Context, conn *pgx.Conn, fn func() error) error {
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return fmt.Errorf("take migration lock: %w", err)
	}
	defer func() {
		// A failed unlock is released with the session anyway.
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockKey)
	}()
	return fn()
}

func appliedVersions(ctx context.Context, conn *pgx.Conn) (map[string]bool, error) {
	rows, err := conn.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	done := make(map[string]bool, len(versions))
	for _, v := range versions {
		done[v] = true
	}
	return done, nil
}

func applyOne(ctx context.Context, conn *pgx.Conn, m Migration) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// No arguments: pgx sends the file with the simple protocol, so it may
		// hold several statements.
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("apply migration %s: %w", m.Version, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", m.Version); err != nil {
			return fmt.Errorf("record migration %s: %w", m.Version, err)
		}
		return nil
	})
}
