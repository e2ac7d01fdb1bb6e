package testenv

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// EnsureRole creates a NOLOGIN role named name (cluster-wide) unless the
// cluster has one, e.g. rds_replication as Amazon RDS has it; it is dropped
// at cleanup only if EnsureRole made it.
func EnsureRole(t testing.TB, admin *pgx.Conn, name string) {
	t.Helper()
	var missing bool
	if err := admin.QueryRow(t.Context(), "SELECT NOT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)", name).Scan(&missing); err != nil {
		t.Fatal(err)
	}
	if !missing {
		return
	}
	if _, err := admin.Exec(t.Context(), "CREATE ROLE "+pgx.Identifier{name}.Sanitize()+" NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP ROLE "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Logf("drop role %s: %v", name, err)
		}
	})
}
